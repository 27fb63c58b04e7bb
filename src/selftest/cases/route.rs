//! Route evidence read from the serve's processes and the device's busy counter.

use crate::archive::check::Check;
use crate::archive::record::CounterReading;
use crate::judging::verdict::{Outcome, Status};

use super::case::Case;
use super::parts::{base, llama_cpu_route, npu_wrapped_route, serve_waited, BUSY};

/// Route evidence from the serve's processes: --route-lib, --no-route-lib, --route-device,
/// --device-busy.
pub(crate) fn cases() -> Vec<Case> {
    let mut cases = libraries();
    cases.extend(devices());
    cases
}

/// --route-lib and --no-route-lib: the libraries the serve's processes map.
fn libraries() -> Vec<Case> {
    use Status::{Fail, Ok};
    let mut cases = Vec::new();
    let mut c = base("route-lib: a library the serve maps is named");
    c.route = Some(llama_cpu_route());
    c.floors.route_lib = Some("libggml-cpu".into());
    c.expect = vec![(
        Check::Route,
        Ok,
        "process 812 (llama-server) maps libggml-cpu.so.0.26.0 (/libggml-cpu/); log ok",
    )];
    cases.push(c);

    let mut c = base("route-lib: a library no process maps fails, naming what was mapped");
    c.route = Some(llama_cpu_route());
    c.floors.route_lib = Some("libggml-cuda".into());
    c.expect = vec![(Check::Route,
        Fail,
        "no process of the serve maps /libggml-cuda/ (mapped: libggml-cpu.so.0.26.0, libggml-base.so.0.26.0, libggml.so.0.26.0, libc.so.6",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("route-lib: a passing log never excuses the library");
    c.route = Some(llama_cpu_route());
    c.floors.route_lib = Some("libggml-cuda".into());
    c.floors.busy_skip = Some(0.0);
    c.load = Some(serve_waited(900));
    c.expect = vec![(Check::Route, Fail, "; log ok")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("no-route-lib: the slow backend's library fails route");
    c.route = Some(llama_cpu_route());
    c.floors.no_route_lib = Some(r"libggml-cpu\.so".into());
    c.expect = vec![(
        Check::Route,
        Fail,
        r"process 812 (llama-server) maps /libggml-cpu\.so/: /opt/llama/lib/libggml-cpu.so.0.26.0",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("no-route-lib: maps that could not be read prove nothing");
    let mut unread = llama_cpu_route();
    unread.processes[0].maps.clear();
    unread.problems = vec!["/proc/812/maps: Permission denied (os error 13)".into()];
    c.route = Some(unread);
    c.floors.no_route_lib = Some("libggml-cpu".into());
    c.expect = vec![(Check::Route,
        Fail,
        "could not show that no process maps /libggml-cpu/; could not read: \"/proc/812/maps: Permission denied",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    cases
}

/// --route-device and --device-busy: the device held and its busy counter; a run without
/// route.json.
fn devices() -> Vec<Case> {
    use Status::{Fail, Ok};
    let mut cases = Vec::new();
    let mut c = base("route-lib and route-device: the wrapper's child is looked at");
    c.route = Some(npu_wrapped_route());
    c.floors.route_lib = Some("libopenvino_intel_npu_plugin".into());
    c.floors.route_device = Some("^/dev/accel/accel[0-9]+$".into());
    c.expect = vec![(Check::Route,
        Ok,
        "process 901 (ovms) maps libopenvino_intel_npu_plugin.so (/libopenvino_intel_npu_plugin/); process 901 (ovms) held /dev/accel/accel0 open",
    )];
    cases.push(c);

    let mut c = base("route-device: no device held fails, naming what was held");
    c.route = Some(llama_cpu_route());
    c.floors.route_device = Some("^/dev/nvidia[0-9]+$".into());
    c.expect = vec![(Check::Route,
        Fail,
        "no process of the serve held open a file matching /^/dev/nvidia[0-9]+$/ during the replies (held: /dev/null, /runs/a/serve.log)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("device-busy: the share of the replies the device was busy");
    c.route = Some(npu_wrapped_route());
    c.floors.device_busy = Some(BUSY.into());
    c.expect = vec![(Check::Route,
        Ok,
        "the device was busy 71% of the replies (/sys/class/accel/accel0/device/npu_busy_time_us advanced 2130000 us in 3.0 s)",
    )];
    cases.push(c);

    let mut c = base("device-busy: a counter that did not advance fails");
    let mut idle = npu_wrapped_route();
    if let Some(k) = idle.counter.as_mut() {
        k.after = k.before.map(|b| CounterReading {
            at_ns: 4_000_000_000,
            ..b
        });
    }
    c.route = Some(idle);
    c.floors.device_busy = Some(BUSY.into());
    c.expect = vec![(Check::Route,
        Fail,
        "busy counter /sys/class/accel/accel0/device/npu_busy_time_us did not advance during the replies (it read 5000000 before and after)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("device-busy: a counter the run did not read fails");
    c.route = Some(llama_cpu_route());
    c.floors.device_busy = Some(BUSY.into());
    c.expect = vec![(
        Check::Route,
        Fail,
        "the run recorded no readings of the busy counter",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("route evidence asked of a run without route.json fails");
    c.floors.route_lib = Some("libggml-cpu".into());
    c.expect = vec![(
        Check::Route,
        Fail,
        "the run recorded no process evidence (no route.json",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    cases
}
