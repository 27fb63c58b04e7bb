//! Route evidence read from the serve's own processes (issue 17): the files its tree maps and
//! holds open, read from the real /proc of real children, into route.json, and judged again
//! from the archive alone.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::*;

/// A shell script in `dir` that runs its arguments as a child and does not exec them, as a
/// Python wrapper or Lemonade does with the real server.
fn wrapper(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// `run` on the stand-in started by `wrapper`: exit code, stdout.
fn wrapped_run(out: &Path, wrapper: &Path, gate_args: &[&str]) -> (Option<i32>, String) {
    let o = gate()
        .args(["run", "--replies", "2", "--out"])
        .arg(out)
        .args(UNFLIPPABLE)
        .args(gate_args)
        .arg("--")
        .arg(wrapper)
        .args([BIN, "stand-in", "--port", "{port}"])
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

fn judge(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = gate().arg("judge").arg(dir).args(args).output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// The process of route.json whose pid is `pid`.
fn process(route: &Value, pid: u64) -> &Value {
    route["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("no process {pid} in {route}"))
}

/// The stand-in maps the gate's own binary; the shell that wraps it does not.
const OWN_BINARY: &str = "npu-serve-smoke$";

#[test]
fn a_wrapper_that_does_not_exec_is_walked_to_the_child_that_maps_the_library() {
    let (d, out) = scratch();
    // A command after the child keeps the shell from exec'ing it.
    let w = wrapper(d.path(), "wrap.sh", "\"$@\"\nstatus=$?\nexit $status");
    let (code, stdout) = wrapped_run(&out, &w, &["--route-lib", OWN_BINARY]);
    assert_eq!(code, Some(0), "{stdout}");
    let route = json(&out.join("route.json"));
    let root = route["root_pid"].as_u64().unwrap();
    assert_eq!(json(&out.join("run.json"))["serve_pid"], root);
    let wrap = process(&route, root);
    assert!(
        !wrap["maps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m.as_str().unwrap().ends_with("/npu-serve-smoke")),
        "the wrapper itself does not map the binary: {wrap}"
    );
    let found = &route["matched"][0]["found"][0];
    let child: u64 = found
        .as_str()
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(child, root, "{route}");
    assert_eq!(process(&route, child)["parent"], root, "{route}");
    assert!(
        line(&stdout, "route").contains(&format!(
            "ok    process {child} (npu-serve-smoke) maps npu-serve-smoke (/{OWN_BINARY}/)"
        )),
        "{stdout}"
    );
    assert_eq!(route["read_after_replies"], true);

    // Judged again from the archive alone: a library the child never mapped fails, naming what
    // the tree did map.
    let (code, judged) = judge(&out, &["--route-lib", "libggml-cuda"]);
    assert_eq!(code, Some(1), "{judged}");
    let route_line = line(&judged, "route");
    assert!(
        route_line.contains("FAIL  no process of the serve maps /libggml-cuda/ (mapped: "),
        "{judged}"
    );
    assert!(route_line.contains("libc"), "{judged}");
    assert!(line(&judged, "content").contains(" ok "), "{judged}");
}

#[test]
fn an_orphan_the_supervisor_adopted_is_part_of_the_tree() {
    // A serve that starts its worker in a subshell that exits at once (a double fork): the
    // worker is reparented to the gate's supervisor, the subreaper, and is still the serve's.
    let (d, out) = scratch();
    let w = wrapper(
        d.path(),
        "daemonize.sh",
        "( \"$@\" & )\nwhile :; do sleep 1; done",
    );
    let (code, stdout) = wrapped_run(&out, &w, &["--route-lib", OWN_BINARY]);
    assert_eq!(code, Some(0), "{stdout}");
    let route = json(&out.join("route.json"));
    let root = route["root_pid"].as_u64().unwrap();
    let found = route["matched"][0]["found"][0].as_str().unwrap();
    let worker: u64 = found.split(' ').next().unwrap().parse().unwrap();
    assert_ne!(process(&route, worker)["parent"], root, "{route}");
    assert!(line(&stdout, "route").contains("ok "), "{stdout}");
    let stop = &json(&out.join("run.json"))["stop"];
    assert_eq!(
        stop["left_running"], 0,
        "the worker was stopped too: {stop}"
    );
}

#[test]
fn a_file_the_serve_holds_open_is_found_and_one_it_does_not_fails_naming_what_it_held() {
    let (d, out) = scratch();
    // The stand-in's stdin is /dev/null, a character device, held open all run; and a model
    // file, a regular one, on fd 3.
    let model = d.path().join("model.bin");
    std::fs::write(&model, "weights").unwrap();
    let o = gate()
        .args([
            "run",
            "--replies",
            "1",
            "--route-device",
            "^/dev/null$",
            "--out",
        ])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args([
            "--",
            "sh",
            "-c",
            "exec \"$0\" stand-in --port \"$1\" --tokens 3 3<\"$2\"",
            BIN,
            "{port}",
        ])
        .arg(&model)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(
        line(&stdout, "route").contains("held /dev/null open (/^/dev/null$/)"),
        "{stdout}"
    );
    // The model file is held open too, but a regular file is no device.
    let model = model.canonicalize().unwrap();
    let (code, judged) = judge(&out, &["--route-device", r"/model\.bin$"]);
    assert_eq!(code, Some(1), "{judged}");
    assert!(
        line(&judged, "route").contains(&format!(
            "held {} open, but it is a regular file, not a character device",
            model.display()
        )),
        "{judged}"
    );
    let (code, judged) = judge(&out, &["--route-device", "^/dev/nvidia[0-9]+$"]);
    assert_eq!(code, Some(1), "{judged}");
    assert!(
        line(&judged, "route").contains(
            "FAIL  no process of the serve held open a file matching /^/dev/nvidia[0-9]+$/ during the replies (held: /dev/null"
        ),
        "{judged}"
    );
}

#[test]
fn a_busy_counter_that_does_not_advance_fails_route_and_load_never_excuses_it() {
    let (d, out) = scratch();
    let counter = d.path().join("npu_busy_time_us");
    std::fs::write(&counter, "4242\n").unwrap();
    let (code, stdout) = stand_in_run(
        &out,
        &[
            "--replies",
            "1",
            "--device-busy",
            counter.to_str().unwrap(),
            "--busy-skip",
            "0",
        ],
        &["--tokens", "3"],
    );
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        line(&stdout, "route").contains(&format!(
            "FAIL  the device's busy counter {} did not advance during the replies (it read 4242 before and after)",
            counter.display()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("RESULT: FAIL"), "{stdout}");
    let route = json(&out.join("route.json"));
    assert_eq!(route["counter"]["unit"], "us", "{route}");
    assert_eq!(route["counter"]["before"]["value"], 4242);
}

#[test]
fn an_archive_without_route_json_judges_as_before_and_fails_a_route_pattern() {
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "1", "--fast-route", "route: stand-in"],
        &["--tokens", "3"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    // As a run from before route evidence (and digests, which would call it changed): no
    // route.json.
    forget_digests(&out);
    std::fs::remove_file(out.join("route.json")).unwrap();
    let (code, judged) = judge(&out, &[]);
    assert_eq!(code, Some(0), "{judged}");
    assert_eq!(
        line(&judged, "route"),
        "route        ok    the serve log names the fast route"
    );
    let (code, judged) = judge(&out, &["--route-lib", "libggml-cpu"]);
    assert_eq!(code, Some(1), "{judged}");
    assert!(
        line(&judged, "route").contains(
            "FAIL  the run recorded no process evidence (no route.json: the run is from before route evidence"
        ),
        "{judged}"
    );
    assert!(line(&judged, "route").ends_with("; log ok"), "{judged}");
    // One that cannot be read says so.
    std::fs::write(out.join("route.json"), "{\"processes\": 7").unwrap();
    let (code, judged) = judge(&out, &["--route-lib", "libggml-cpu"]);
    assert_eq!(code, Some(1), "{judged}");
    assert!(
        line(&judged, "route").contains("(route.json is unreadable ("),
        "{judged}"
    );
}

#[test]
fn an_attached_serve_has_no_process_to_look_at_and_fails_process_evidence() {
    let (d, out) = scratch();
    let s = StandIn::start(&["--tokens", "3"], &d.path().join("stand-in.log"));
    let o = gate()
        .args(["run", "--replies", "1", "--url", &s.url, "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .args(["--route-lib", "x"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(
        line(&stdout, "route").contains(
            "FAIL  --route-lib /x/ cannot be judged: the gate attached to a serve already running and launched no process to look at"
        ),
        "{stdout}"
    );
}

#[test]
fn a_busy_counter_a_real_process_advances_passes_with_the_share_of_the_replies() {
    // The stand-in adds the microseconds it spends on each reply to a sysfs-like counter file
    // (written whole, by rename), holding a character device open as the device.
    let (d, out) = scratch();
    let counter = d.path().join("npu_busy_time_us");
    std::fs::write(&counter, "0\n").unwrap();
    let device = d.path().join("accel0");
    std::fs::write(&device, "").unwrap();
    let (code, stdout) = stand_in_run(
        &out,
        &[
            "--replies",
            "2",
            "--device-busy",
            counter.to_str().unwrap(),
            "--route-device",
            "^/dev/null$",
        ],
        &[
            "--busy-counter",
            counter.to_str().unwrap(),
            "--hold-open",
            "/dev/null",
            "--gaps-ms",
            "20",
        ],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let route = line(&stdout, "route");
    assert!(route.contains("the device was busy "), "{stdout}");
    assert!(route.contains(" us in "), "{stdout}");
    let record = json(&out.join("route.json"));
    let k = &record["counter"];
    assert!(
        k["after"]["value"].as_u64().unwrap() > k["before"]["value"].as_u64().unwrap(),
        "{k}"
    );
    // The fdinfo position of a held file named as the device, moved by 5 a token: a regular
    // file, not a device, so neither it nor its position is evidence (issue 30), however it
    // advances. (No character device an unprivileged test may open keeps a position that
    // moves, so the counter's sum over devices is pinned by route_probe's unit tests.)
    let (_d2, out2) = scratch();
    let (code, stdout) = stand_in_run(
        &out2,
        &[
            "--replies",
            "2",
            "--device-busy",
            "fdinfo:pos",
            "--route-device",
            "/accel0$",
        ],
        &[
            "--hold-open",
            device.to_str().unwrap(),
            "--held-pos-per-token",
            "5",
        ],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let route = line(&stdout, "route");
    assert!(
        route.contains(
            "FAIL  no process of the serve held open a character device matching //accel0$/ during the replies: process "
        ) && route.contains(&format!(
            "held {} open, but it is a regular file, not a character device",
            device.canonicalize().unwrap().display()
        )),
        "{stdout}"
    );
    assert!(
        route.contains(
            "the device's busy counter fdinfo:pos did not advance during the replies (it read 0 before and after)"
        ),
        "{stdout}"
    );
    let k = &json(&out2.join("route.json"))["counter"];
    assert_eq!(
        (&k["before"]["value"], &k["after"]["value"]),
        (&0.into(), &0.into()),
        "{k}"
    );
}

/// A copy of a shared object this test process runs (its C library), as `name` in `dir`: a
/// real ELF shared object with a name of our choosing.
fn copy_of_a_shared_object(dir: &Path, name: &str) -> PathBuf {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let lib = maps
        .lines()
        .filter(|l| l.split_whitespace().nth(1).is_some_and(|p| p.contains('x')))
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
        .unwrap_or_else(|| panic!("this test maps no C library as code:\n{maps}"));
    let to = dir.join(name);
    std::fs::copy(lib, &to).unwrap();
    to.canonicalize().unwrap()
}

/// Issue 30: a read-only text file named libggml-cuda.so counted as the CUDA backend.
#[test]
fn issue_30_a_file_bearing_a_librarys_name_is_not_the_library_unless_mapped_as_elf_code() {
    let (d, out) = scratch();
    let text = d.path().join("libggml-cuda.so");
    std::fs::write(&text, "libggml-cuda.so: not a library\n").unwrap();
    let text_code = d.path().join("libggml-vulkan.so");
    std::fs::write(&text_code, "not a library either, mapped as code\n").unwrap();
    let real = copy_of_a_shared_object(d.path(), "libfake-npu.so");
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "1", "--route-lib", "libggml-cuda"],
        &[
            "--tokens",
            "3",
            "--map-file",
            text.to_str().unwrap(),
            "--map-exec",
            text_code.to_str().unwrap(),
            "--map-exec",
            real.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let route = line(&stdout, "route");
    assert!(
        route.starts_with(
            "route        FAIL  no process of the serve maps /libggml-cuda/ as code: process "
        ) && route.ends_with(
            " (npu-serve-smoke) maps libggml-cuda.so, but not as executable code (r--p)"
        ),
        "{stdout}"
    );
    // The verdict is a function of route.json: judge prints the same line from the archive.
    let (code, judged) = judge(&out, &[]);
    assert_eq!(code, Some(1), "{judged}");
    assert_eq!(line(&judged, "route"), route);

    // Code that is not ELF is not a library either; a real shared object mapped as code is.
    let (_, judged) = judge(&out, &["--route-lib", "libggml-vulkan"]);
    assert!(
        line(&judged, "route")
            .ends_with("maps libggml-vulkan.so, but it is not an ELF shared object"),
        "{judged}"
    );
    let (code, judged) = judge(&out, &["--route-lib", r"libfake-npu\.so$"]);
    assert_eq!(code, Some(0), "{judged}");
    assert!(
        line(&judged, "route")
            .contains(r" (npu-serve-smoke) maps libfake-npu.so (/libfake-npu\.so$/"),
        "{judged}"
    );
    // A forbidden library counts however it is mapped, and the line says how it was.
    let (code, judged) = judge(
        &out,
        &[
            "--route-lib",
            "libfake-npu",
            "--no-route-lib",
            "libggml-cuda",
        ],
    );
    assert_eq!(code, Some(1), "{judged}");
    assert!(
        line(&judged, "route").contains(&format!(
            "maps /libggml-cuda/: {} (not as executable code (r--p); any mapping of a forbidden library counts)",
            text.canonicalize().unwrap().display()
        )),
        "{judged}"
    );
    // What route.json holds to judge it again.
    let record = json(&out.join("route.json"));
    let stand_in = record["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["comm"] == "npu-serve-smoke")
        .unwrap();
    let kinds = &stand_in["map_kinds"];
    let real_kind = &kinds[real.to_str().unwrap()];
    assert_eq!(
        real_kind["perms"],
        serde_json::json!(["r-xp"]),
        "{real_kind}"
    );
    assert_eq!(real_kind["header"], "elf-shared-object", "{real_kind}");
    assert!(
        ["map_files", "path"].contains(&real_kind["header_via"].as_str().unwrap()),
        "{real_kind}"
    );
    let text_kind = &kinds[text.canonicalize().unwrap().to_str().unwrap()];
    assert_eq!(
        text_kind["perms"],
        serde_json::json!(["r--p"]),
        "{text_kind}"
    );
    assert!(
        text_kind.get("header").is_none(),
        "a data mapping's header is not read: {text_kind}"
    );
}

#[test]
fn issue_30_a_regular_file_named_as_the_device_is_not_the_device_and_a_character_device_is() {
    let (d, out) = scratch();
    std::fs::create_dir(d.path().join("x")).unwrap();
    let fake = d.path().join("x").join("accel0");
    std::fs::write(&fake, "").unwrap();
    let (code, stdout) = stand_in_run(
        &out,
        &["--replies", "1", "--route-device", "accel0"],
        &[
            "--tokens",
            "3",
            "--hold-open",
            fake.to_str().unwrap(),
            "--hold-open",
            "/dev/null",
        ],
    );
    assert_eq!(code, Some(1), "{stdout}");
    let route = line(&stdout, "route");
    assert!(
        route.ends_with(&format!(
            " (npu-serve-smoke) held {} open, but it is a regular file, not a character device",
            fake.canonicalize().unwrap().display()
        )),
        "{stdout}"
    );
    let (_, judged) = judge(&out, &[]);
    assert_eq!(line(&judged, "route"), route);
    let (code, judged) = judge(&out, &["--route-device", "^/dev/null$"]);
    assert_eq!(code, Some(0), "{judged}");
    assert!(
        line(&judged, "route").ends_with(" held /dev/null open (/^/dev/null$/)"),
        "{judged}"
    );
    let record = json(&out.join("route.json"));
    let kinds = &record["processes"][0]["open_kinds"];
    assert_eq!(kinds["/dev/null"], "char-device", "{record}");
    assert_eq!(
        kinds[fake.canonicalize().unwrap().to_str().unwrap()],
        "regular",
        "{record}"
    );
}

#[test]
fn a_counter_that_is_no_counter_is_refused_at_once_and_an_endless_one_is_not_read_forever() {
    let (d, out) = scratch();
    let words = d.path().join("busy");
    std::fs::write(&words, "busy\n").unwrap();
    for (counter, says) in [
        (words.to_str().unwrap(), "does not hold a number"),
        // Refused from what it is, before a byte is read (issue 30).
        ("/dev/zero", "/dev/zero is a character device, not a file"),
        ("/nonexistent/npu_busy_time_us", "failed to open"),
    ] {
        let o = gate()
            .args(["run", "--stand-in", "--out"])
            .arg(&out)
            .args(UNFLIPPABLE)
            .args(["--device-busy", counter])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{counter}: {stderr}");
        assert!(stderr.contains(says), "{counter}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(!out.exists());
    }
}
