//! The workload's hash: the prompts, the default max_tokens and the body fields every request
//! sends, as canonical JSON, hashed; two runs with the same hash asked the same.

use sha2::{Digest, Sha256};

use crate::archive::record::Sampling;
use crate::prompts::Prompt;

/// sha256 of the workload as canonical JSON: the prompts (as run.json has them, less `stops`), the default
/// max_tokens and the extra body, keys sorted at every level, no whitespace. Canonical by hand
/// rather than by serde_json's map order, which a feature elsewhere in the build could change.
///
/// The sampling sent (`--temperature`, `--seed`) is hashed as the body fields it is: a seed,
/// and a temperature other than the gate's 0, as if the extra body had held them. So
/// `--seed 42` and `--extra-body '{"seed": 42}'` (the one way before the flag) are the same
/// workload, and a run that asks for nothing new hashes as it always did.
pub fn workload_sha256(
    prompts: &[Prompt],
    max_tokens: u32,
    extra_body: Option<&serde_json::Map<String, serde_json::Value>>,
    sampling: Option<&Sampling>,
) -> String {
    let mut body = extra_body.cloned().unwrap_or_default();
    if let Some(s) = sampling {
        if let Some(seed) = s.seed {
            body.entry("seed").or_insert(seed.into());
        }
        if let Some(t) = s.temperature.filter(|t| *t != 0.0) {
            body.entry("temperature").or_insert(t.into());
        }
    }
    let body = (extra_body.is_some() || !body.is_empty()).then_some(body);
    // What is sent: a prompt's `stops` (issue 32) says how its answer is judged, not what the
    // serve is asked, so a run of the built-in prompts hashes as it did before they had it.
    let sent: Vec<Prompt> = prompts
        .iter()
        .map(|p| Prompt {
            stops: None,
            ..p.clone()
        })
        .collect();
    let workload = serde_json::json!({
        "prompts": sent,
        "max_tokens": max_tokens,
        "extra_body": body,
    });
    let mut text = String::new();
    canonical_json(&workload, &mut text);
    hex(&Sha256::digest(text.as_bytes()))
}

/// `value` as JSON with every object's keys sorted and no whitespace.
pub fn canonical_json(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut fields: Vec<_> = map.iter().collect();
            fields.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in fields.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical_json(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workload_hash_is_canonical() {
        let prompts = vec![Prompt {
            expect: Some("4".into()),
            ..Prompt::plain("What is 2+2?")
        }];
        let a: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2], "x": "é"}}"#).unwrap();
        let b: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"a": {"x": "é", "y": [1, 2]}, "b": 1}"#).unwrap();
        let h = workload_sha256(&prompts, 64, Some(&a), None);
        assert_eq!(
            h,
            workload_sha256(&prompts, 64, Some(&b), None),
            "key order"
        );
        assert_eq!(h.len(), 64);
        assert_ne!(
            h,
            workload_sha256(&prompts, 65, Some(&a), None),
            "max_tokens"
        );
        assert_ne!(h, workload_sha256(&prompts, 64, None, None), "extra body");
        let mut other = prompts.clone();
        other[0].expect = None;
        assert_ne!(
            h,
            workload_sha256(&other, 64, Some(&a), None),
            "the expected answer"
        );
        // Sampling the body always sent (temperature 0, no seed) hashes as before it was
        // recorded; a seed or another temperature is another workload.
        let greedy = Sampling {
            temperature: Some(0.0),
            seed: None,
        };
        assert_eq!(h, workload_sha256(&prompts, 64, Some(&a), Some(&greedy)));
        for other in [
            Sampling {
                temperature: Some(0.0),
                seed: Some(42),
            },
            Sampling {
                temperature: Some(0.7),
                seed: None,
            },
        ] {
            assert_ne!(
                h,
                workload_sha256(&prompts, 64, Some(&a), Some(&other)),
                "{other:?}"
            );
        }
        // A seed and a temperature hash as the body fields they are sent as.
        let plain = workload_sha256(&prompts, 64, None, None);
        assert_eq!(plain, workload_sha256(&prompts, 64, None, Some(&greedy)));
        let seeded: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"seed": 42, "temperature": 0.7}"#).unwrap();
        assert_eq!(
            workload_sha256(
                &prompts,
                64,
                Some(&seeded),
                Some(&Sampling::of_body(Some(&seeded)))
            ),
            workload_sha256(
                &prompts,
                64,
                None,
                Some(&Sampling {
                    temperature: Some(0.7),
                    seed: Some(42),
                })
            ),
            "--seed 42 --temperature 0.7 is --extra-body's seed and temperature"
        );

        let mut text = String::new();
        canonical_json(
            &serde_json::json!({"b": [true, null, 1.5], "a": "q\"", "c": {}}),
            &mut text,
        );
        assert_eq!(text, r#"{"a":"q\"","b":[true,null,1.5],"c":{}}"#);
        // The bytes hashed, pinned: a change here changes every run's workload hash.
        let mut text = String::new();
        canonical_json(
            &serde_json::json!({"prompts": prompts, "max_tokens": 64, "extra_body": null}),
            &mut text,
        );
        assert_eq!(
            text,
            r#"{"extra_body":null,"max_tokens":64,"prompts":[{"expect":"4","prompt":"What is 2+2?"}]}"#
        );
    }
}
