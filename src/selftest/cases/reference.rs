//! The reference line (issue 31): the candidate's tokens against a trusted build's, near-ties
//! and hard divergences, and a re-anchor past a near-tie.

use crate::archive::check::Check;
use crate::archive::record::ReanchorRecord;
use crate::judging::verdict::{Outcome, Status};

use super::case::Case;
use super::parts::{against_reference, noise_build, scored, shifted};

/// The reference line (issue 31): the candidate's tokens against a trusted build's.
pub(crate) fn cases() -> Vec<Case> {
    use Status::{Fail, Ok};
    let mut cases = Vec::new();
    // The reference line (issue 31): the candidate's tokens against a trusted build's.
    let margins = [3.0, 2.9, 0.25];
    let mut c = against_reference(
        "an answer token for token the reference's is identical",
        margins,
        scored(margins, None),
        true,
    );
    c.expect = vec![(
        Check::Reference,
        Ok,
        "top-1 agreement 100.0%; 0 near-ties, 0 hard",
    )];
    cases.push(c);
    let mut c = against_reference(
        "a token the reference nearly chose (0.25 nats) is a near-tie, not a failure",
        margins,
        scored(margins, Some(2)),
        true,
    );
    c.expect = vec![(
        Check::Reference,
        Ok,
        "1 near-tie (margins 0.25 nats), 0 hard",
    )];
    cases.push(c);
    let mut c = against_reference(
        "a token the reference ruled out (2.9 nats) is a hard divergence",
        margins,
        scored(margins, Some(1)),
        true,
    );
    c.expect = vec![(Check::Reference, Fail, "the reference's margin 2.90 nats")];
    c.outcome = Outcome::Fail;
    cases.push(c);
    // Re-anchored past a near-tie at "Par" (0.25 nats), the candidate goes on "ys": a token
    // the reference ruled out by 2.9 nats, which judging up to the first divergence never
    // sees.
    let torn = [0.25, 2.9, 3.0];
    let mut c = against_reference(
        "re-anchored past a near-tie, the hard divergence behind it fails",
        torn,
        scored(torn, Some(0)),
        true,
    );
    if let Some(r) = c.reference.as_mut() {
        let mut rest = scored(torn, Some(1));
        rest.remove(0);
        r.reanchors = vec![ReanchorRecord {
            prompt: c.replies[0].prompt.clone(),
            at_token: 0,
            prefix: "Par".into(),
            content: rest.iter().map(|t| t.token.as_str()).collect(),
            logprobs: Some(rest),
            finish_reason: Some("stop".into()),
            error: None,
        }];
    }
    c.expect = vec![(Check::Reference,
        Fail,
        "at token 1 (byte 3, after 1 re-anchor): \"ys\" here, \"is\" at the reference; the reference's margin 2.90 nats",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    let mut c = against_reference(
        "a reference without logprobs cannot be compared",
        margins,
        scored(margins, None),
        false,
    );
    c.expect = vec![(Check::Reference, Fail, "logprobs")];
    c.outcome = Outcome::Fail;
    cases.push(c);
    cases.extend(noise_cases(margins));

    cases
}

/// The reference line held to known-good builds' noise (`--reference-noise`, issue 52).
fn noise_cases(margins: [f64; 3]) -> Vec<Case> {
    use Status::{Fail, Ok};
    let with_noise = |name, candidate, noise: Vec<(&'static str, f64)>| {
        let mut c = against_reference(name, margins, candidate, true);
        if let Some(r) = c.reference.as_mut() {
            r.noise = noise
                .into_iter()
                .map(|(n, shift)| noise_build(n, shifted(margins, shift)))
                .collect();
        }
        c
    };
    let mut cases = Vec::new();
    let mut c = with_noise(
        "a candidate inside the known-good builds' noise is ok",
        shifted(margins, 0.1),
        vec![("runs/good-a", 0.12), ("runs/good-b", 0.06)],
    );
    c.expect =
        vec![(Check::Reference,
        Ok,
        "held to 2x the worst of 2 known-good builds (--reference-noise): same top token 100.0%",
    )];
    cases.push(c);
    let mut c = with_noise(
        "a candidate at three times the noise fails",
        shifted(margins, 0.15),
        vec![("runs/good-a", 0.05)],
    );
    c.expect = vec![(Check::Reference,
        Fail,
        "|Δ logprob| of the reference's token, mean 0.150 nats beyond the limit 0.100 nats, 2x the noise's 0.050 nats (runs/good-a)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    let mut c = with_noise(
        "a noise wider than the candidate still catches a hard divergence it never shows",
        scored(margins, Some(1)),
        vec![("runs/wide", 0.5)],
    );
    c.expect = vec![(Check::Reference,
        Fail,
        "hard divergences per 100 positions 50.00 beyond the limit 0.00, 2x the noise's 0.00 (runs/wide)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    let mut c = with_noise(
        "a noise build that is the reference bit for bit cannot be used: at best inconclusive",
        shifted(margins, 0.1),
        vec![("runs/same", 0.0)],
    );
    c.expect = vec![(
        Check::Reference,
        Status::Inconclusive,
        "the noise cannot be used (runs/same: it computed what the reference did, bit for bit",
    )];
    c.outcome = Outcome::Inconclusive {
        reason: "reference inconclusive".into(),
    };
    cases.push(c);
    cases
}
