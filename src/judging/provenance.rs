//! Provenance compared (issue 18): what differs between two runs' provenance, and what each
//! difference means. A different model file, workload or serve argument makes the runs measure
//! different things: [`Kind::NotComparable`]. A different host, CPU, memory, kernel, module or
//! firmware is the same measurement on another box ([`Kind::Box`]), which a baseline comparison
//! may be told to accept by the fact's short name ([`BoxFact::name`]: `host`, `cpu`, `memory`,
//! `kernel`, `modules`, `firmware`, `tool`). The serve binary is not among them: which binary
//! is gated is the point of comparing; [`same_binary`] says when both runs gated the same one.
//!
//! Pure: provenance in, differences out.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Serialize, Serializer};

use crate::archive::record::{HashedFile, Provenance, PORT_PLACEHOLDER};

/// The box facts a difference can be in, each with the short name `--baseline-allow` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BoxFact {
    /// The host name and the machine id (`host`).
    Host,
    /// The CPU's model and count (`cpu`).
    Cpu,
    /// The memory (`memory`).
    Memory,
    /// The kernel release (`kernel`).
    Kernel,
    /// An accelerator module's version (`modules`).
    Modules,
    /// A device firmware version (`firmware`).
    Firmware,
    /// The gate's own version (`tool`).
    Tool,
}

impl BoxFact {
    /// Every box fact, in the order differences are listed.
    pub const ALL: [BoxFact; 7] = [
        BoxFact::Host,
        BoxFact::Cpu,
        BoxFact::Memory,
        BoxFact::Kernel,
        BoxFact::Modules,
        BoxFact::Firmware,
        BoxFact::Tool,
    ];

    /// The short name, as `--baseline-allow` takes it.
    pub fn name(self) -> &'static str {
        match self {
            BoxFact::Host => "host",
            BoxFact::Cpu => "cpu",
            BoxFact::Memory => "memory",
            BoxFact::Kernel => "kernel",
            BoxFact::Modules => "modules",
            BoxFact::Firmware => "firmware",
            BoxFact::Tool => "tool",
        }
    }

    /// The fact a short name names.
    pub fn from_name(name: &str) -> Option<BoxFact> {
        BoxFact::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Parse a comma-separated list of short names (`host,kernel`); an unknown name is an error
/// that lists the known ones.
pub fn parse_allow(list: &str) -> Result<Vec<BoxFact>, String> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match BoxFact::from_name(name) {
            Some(f) if !out.contains(&f) => out.push(f),
            Some(_) => {}
            None => {
                let known: Vec<_> = BoxFact::ALL.iter().map(|f| f.name()).collect();
                return Err(format!(
                    "{name:?} is not a box fact; the names are {}",
                    known.join(", ")
                ));
            }
        }
    }
    Ok(out)
}

/// What a difference means for comparing the two runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The runs measured different things (a model file, the workload, the serve's arguments):
    /// no verdict follows from comparing them.
    NotComparable,
    /// The same measurement on a different box, in this fact.
    Box(BoxFact),
}

/// One fact that differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// What differs, e.g. `model file /m/x.gguf`, `serve argv`, `workload`, `kernel`,
    /// `module intel_vpu`, `firmware amdxdna 0000:c5:00.1 fw_version`.
    pub field: String,
    /// What it means.
    pub kind: Kind,
    /// The candidate's value (`unknown` where it was not recorded, `absent` where the run has
    /// no such file, module or firmware).
    pub candidate: String,
    /// The baseline's value, likewise.
    pub baseline: String,
}

impl Difference {
    /// The short name that allows this difference, for a box difference.
    pub fn allow_name(&self) -> Option<&'static str> {
        match self.kind {
            Kind::Box(f) => Some(f.name()),
            Kind::NotComparable => None,
        }
    }

    /// Whether `allowed` accepts it: a box difference whose fact is in the list. A difference
    /// that makes the runs not comparable is never allowed.
    pub fn allowed_by(&self, allowed: &[BoxFact]) -> bool {
        matches!(self.kind, Kind::Box(f) if allowed.contains(&f))
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let meaning = match self.kind {
            Kind::NotComparable => "not comparable".to_string(),
            Kind::Box(b) => format!("box: {}", b.name()),
        };
        write!(
            f,
            "{}: {} (first run: {}), {meaning}",
            self.field, self.candidate, self.baseline
        )
    }
}

/// As JSON: `{"field", "kind": "not-comparable" | "box", "allow": name or null, "candidate",
/// "baseline"}`.
impl Serialize for Difference {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Shown<'a> {
            field: &'a str,
            kind: &'static str,
            allow: Option<&'static str>,
            candidate: &'a str,
            baseline: &'a str,
        }
        Shown {
            field: &self.field,
            kind: match self.kind {
                Kind::NotComparable => "not-comparable",
                Kind::Box(_) => "box",
            },
            allow: self.allow_name(),
            candidate: &self.candidate,
            baseline: &self.baseline,
        }
        .serialize(s)
    }
}

/// Whether both runs gated the same serve binary (by sha256): an A/A comparison. Unknown
/// (attached, nothing launched) is not the same.
pub fn same_binary(a: &Provenance, b: &Provenance) -> bool {
    matches!((&a.serve_binary_sha256, &b.serve_binary_sha256), (Some(x), Some(y)) if x == y)
}

/// Every fact of `candidate` that differs from `baseline`: first those that make the runs not
/// comparable (model files, serve arguments, workload), then the box's, in the order of
/// [`BoxFact::ALL`].
pub fn differences(candidate: &Provenance, baseline: &Provenance) -> Vec<Difference> {
    let mut out = Vec::new();
    model_files(&candidate.model_files, &baseline.model_files, &mut out);
    serve_args(candidate, baseline, &mut out);
    let mut differ = |field: &str, kind: Kind, c: String, b: String| {
        if c != b {
            out.push(Difference {
                field: field.to_string(),
                kind,
                candidate: c,
                baseline: b,
            });
        }
    };
    differ(
        "workload",
        Kind::NotComparable,
        short(&candidate.workload_sha256),
        short(&baseline.workload_sha256),
    );
    let known = |v: &Option<String>| v.clone().unwrap_or_else(|| UNKNOWN.to_string());
    let host = Kind::Box(BoxFact::Host);
    differ("host", host, known(&candidate.host), known(&baseline.host));
    differ(
        "machine id",
        host,
        known(&candidate.machine_id),
        known(&baseline.machine_id),
    );
    let cpu = Kind::Box(BoxFact::Cpu);
    differ(
        "cpu model",
        cpu,
        known(&candidate.cpu_model),
        known(&baseline.cpu_model),
    );
    let count = |n: Option<usize>| n.map_or_else(|| UNKNOWN.to_string(), |n| n.to_string());
    differ("cpus", cpu, count(candidate.ncpu), count(baseline.ncpu));
    let kib = |n: Option<u64>| n.map_or_else(|| UNKNOWN.to_string(), |n| format!("{n} KiB"));
    differ(
        "memory",
        Kind::Box(BoxFact::Memory),
        kib(candidate.mem_total_kib),
        kib(baseline.mem_total_kib),
    );
    differ(
        "kernel",
        Kind::Box(BoxFact::Kernel),
        known(&candidate.kernel),
        known(&baseline.kernel),
    );
    maps(
        "module",
        BoxFact::Modules,
        &candidate.modules,
        &baseline.modules,
        &mut out,
    );
    maps(
        "firmware",
        BoxFact::Firmware,
        &candidate.firmware,
        &baseline.firmware,
        &mut out,
    );
    let mut differ = |field: &str, kind: Kind, c: String, b: String| {
        if c != b {
            out.push(Difference {
                field: field.to_string(),
                kind,
                candidate: c,
                baseline: b,
            });
        }
    };
    differ(
        "tool version",
        Kind::Box(BoxFact::Tool),
        candidate.tool_version.clone(),
        baseline.tool_version.clone(),
    );
    out
}

/// A value a run did not record.
pub const UNKNOWN: &str = "unknown";
/// A file, module or firmware a run does not have.
pub const ABSENT: &str = "absent";

/// A hash as shown: its first 12 hex digits, as `compare` shows the binary's.
fn short(sha256: &str) -> String {
    sha256.chars().take(12).collect()
}

/// Model files by path; a file that only moved (another path, the same sha256) is no
/// difference.
fn model_files(c: &[HashedFile], b: &[HashedFile], out: &mut Vec<Difference>) {
    let by_path = |files: &[HashedFile]| -> BTreeMap<String, String> {
        files
            .iter()
            .map(|f| (f.path.clone(), f.sha256.clone()))
            .collect()
    };
    let (cp, bp) = (by_path(c), by_path(b));
    let only =
        |a: &BTreeMap<String, String>, other: &BTreeMap<String, String>| -> BTreeSet<String> {
            a.iter()
                .filter(|(p, _)| !other.contains_key(*p))
                .map(|(_, h)| h.clone())
                .collect()
        };
    // Hashes of the files at paths only one run has: a hash on both sides moved.
    let (c_only, b_only) = (only(&cp, &bp), only(&bp, &cp));
    let paths: BTreeSet<&String> = cp.keys().chain(bp.keys()).collect();
    for path in paths {
        let (ch, bh) = (cp.get(path), bp.get(path));
        let moved = match (ch, bh) {
            (Some(h), None) => b_only.contains(h),
            (None, Some(h)) => c_only.contains(h),
            _ => false,
        };
        if ch == bh || moved {
            continue;
        }
        let shown = |h: Option<&String>| h.map_or_else(|| ABSENT.to_string(), |h| short(h));
        out.push(Difference {
            field: format!("model file {path}"),
            kind: Kind::NotComparable,
            candidate: shown(ch),
            baseline: shown(bh),
        });
    }
}

/// The serve's arguments, without its program (whose path is the candidate's, compared by
/// hash): only the part that differs is shown, `…` standing for what both share.
fn serve_args(c: &Provenance, b: &Provenance, out: &mut Vec<Difference>) {
    let (ca, ba) = (program_args(c), program_args(b));
    if ca == ba {
        return;
    }
    let (candidate, baseline) = match (&ca, &ba) {
        (Some(x), Some(y)) => {
            let prefix = x.iter().zip(y).take_while(|(a, b)| a == b).count();
            let suffix = x[prefix..]
                .iter()
                .rev()
                .zip(y[prefix..].iter().rev())
                .take_while(|(a, b)| a == b)
                .count();
            let part = |v: &[&str]| {
                let middle = &v[prefix..v.len() - suffix];
                let mut words = Vec::new();
                if prefix > 0 {
                    words.push("…".to_string());
                }
                words.push(if middle.is_empty() {
                    "(nothing)".to_string()
                } else {
                    quoted(middle)
                });
                if suffix > 0 {
                    words.push("…".to_string());
                }
                words.join(" ")
            };
            (part(x), part(y))
        }
        _ => {
            let whole = |v: &Option<Vec<&str>>| {
                v.as_deref()
                    .map_or_else(|| "attached, nothing launched".to_string(), quoted)
            };
            (whole(&ca), whole(&ba))
        }
    };
    out.push(Difference {
        field: "serve argv".to_string(),
        kind: Kind::NotComparable,
        candidate,
        baseline,
    });
}

/// The serve's arguments without its program.
fn program_args(p: &Provenance) -> Option<Vec<&str>> {
    let at = p.serve_program_at.unwrap_or(0);
    p.serve_argv.as_ref().map(|argv| {
        argv.iter()
            .enumerate()
            .filter(|(i, _)| *i != at)
            .map(|(_, a)| a.as_str())
            .collect()
    })
}

/// Arguments as a shell would need them quoted.
fn quoted(args: &[&str]) -> String {
    shlex::try_join(args.iter().copied()).unwrap_or_else(|_| args.join(" "))
}

/// Keys of either map whose values differ (`absent` for a key one lacks).
fn maps(
    label: &str,
    fact: BoxFact,
    c: &BTreeMap<String, String>,
    b: &BTreeMap<String, String>,
    out: &mut Vec<Difference>,
) {
    let keys: BTreeSet<&String> = c.keys().chain(b.keys()).collect();
    for key in keys {
        let (cv, bv) = (c.get(key), b.get(key));
        if cv != bv {
            let shown = |v: Option<&String>| v.cloned().unwrap_or_else(|| ABSENT.to_string());
            out.push(Difference {
                field: format!("{label} {key}"),
                kind: Kind::Box(fact),
                candidate: shown(cv),
                baseline: shown(bv),
            });
        }
    }
}

/// The serve's argv of a run as it was asked for, `{port}` where the run's URL's port was
/// filled in, so two runs on two ports compare.
pub fn without_port(argv: &[String], url: &str) -> Vec<String> {
    match url::Url::parse(url)
        .ok()
        .and_then(|u| u.port_or_known_default())
    {
        Some(port) => unfill_port(argv, port),
        None => argv.to_vec(),
    }
}

/// `argv` with the port put back as `{port}`: each run of the port's digits that is the whole
/// argument, or follows `:` or `=` (`--port=8080`, `127.0.0.1:8080`, `http://h:8080/v1`) and
/// ends the argument or is followed by neither a letter nor a digit. So `q4_8080.gguf` and
/// `18080` keep their digits.
pub fn unfill_port(argv: &[String], port: u16) -> Vec<String> {
    let digits = port.to_string();
    argv.iter().map(|a| unfill_one(a, &digits)).collect()
}

fn unfill_one(arg: &str, digits: &str) -> String {
    let bytes = arg.as_bytes();
    let mut out = String::with_capacity(arg.len());
    let mut last = 0;
    for (i, _) in arg.match_indices(digits) {
        let end = i + digits.len();
        let starts = i == 0 || matches!(bytes[i - 1], b':' | b'=');
        let ends = end == bytes.len() || !bytes[end].is_ascii_alphanumeric();
        if starts && ends {
            out.push_str(&arg[last..i]);
            out.push_str(PORT_PLACEHOLDER);
            last = end;
        }
    }
    out.push_str(&arg[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_port_is_put_back_where_it_stands_as_a_port() {
        let argv = strings(&[
            "./serve",
            "--port",
            "41234",
            "--port=41234",
            "--host=127.0.0.1:41234",
            "http://127.0.0.1:41234/v1",
            "[::1]:41234",
            "q4_41234.gguf",
            "141234",
            "412345",
            "-p41234",
            "41234x",
        ]);
        assert_eq!(
            unfill_port(&argv, 41234),
            strings(&[
                "./serve",
                "--port",
                "{port}",
                "--port={port}",
                "--host=127.0.0.1:{port}",
                "http://127.0.0.1:{port}/v1",
                "[::1]:{port}",
                "q4_41234.gguf",
                "141234",
                "412345",
                "-p41234",
                "41234x",
            ])
        );
    }

    fn file(path: &str, sha: &str) -> HashedFile {
        HashedFile {
            path: path.into(),
            size: 1,
            sha256: sha.into(),
            cached: false,
        }
    }

    fn base() -> Provenance {
        Provenance {
            tool_version: "0.1.0".into(),
            serve_binary_sha256: Some("b".repeat(64)),
            model_files: vec![file("/m/x.gguf", &"1".repeat(64))],
            serve_argv: Some(
                [
                    "/rc3/serve",
                    "-m",
                    "/m/x.gguf",
                    "--port",
                    "{port}",
                    "-t",
                    "2",
                ]
                .map(String::from)
                .to_vec(),
            ),
            serve_program_at: Some(0),
            workload_sha256: "w".repeat(64),
            host: Some("box1".into()),
            machine_id: Some("id1".into()),
            cpu_model: Some("Intel(R) Core(TM) Ultra 7 155H".into()),
            ncpu: Some(22),
            mem_total_kib: Some(32_000_000),
            kernel: Some("6.8.0-45-generic".into()),
            modules: [("intel_vpu".to_string(), "1.0.".to_string())].into(),
            firmware: [(
                "amdxdna 0000:c5:00.1 fw_version".to_string(),
                "1.5.2.380".to_string(),
            )]
            .into(),
            problems: vec!["ignored".into()],
        }
    }

    fn fields(d: &[Difference]) -> Vec<(&str, Kind)> {
        d.iter().map(|d| (d.field.as_str(), d.kind)).collect()
    }

    #[test]
    fn the_same_provenance_has_no_differences() {
        let mut other = base();
        other.problems.clear();
        // Another release candidate at another path: the binary is what is compared.
        other.serve_binary_sha256 = Some("c".repeat(64));
        other.serve_argv.as_mut().unwrap()[0] = "/rc4/serve".into();
        assert!(differences(&other, &base()).is_empty());
        assert!(!same_binary(&other, &base()));
        assert!(same_binary(&base(), &base()));
        let mut attached = base();
        attached.serve_binary_sha256 = None;
        assert!(
            !same_binary(&attached, &attached),
            "unknown is not the same"
        );
    }

    #[test]
    fn a_model_file_differs_by_hash_not_by_path() {
        let mut c = base();
        c.model_files[0].sha256 = "2".repeat(64);
        let d = differences(&c, &base());
        assert_eq!(
            d,
            vec![Difference {
                field: "model file /m/x.gguf".into(),
                kind: Kind::NotComparable,
                candidate: "222222222222".into(),
                baseline: "111111111111".into(),
            }]
        );
        assert!(!d[0].allowed_by(&BoxFact::ALL), "never allowed");
        assert_eq!(d[0].allow_name(), None);
        // Moved: the same hash at another path.
        let mut moved = base();
        moved.model_files[0].path = "/n/x.gguf".into();
        assert!(fields(&differences(&moved, &base()))
            .iter()
            .all(|(f, _)| !f.starts_with("model file")));
        // One more file, and one missing.
        let mut more = base();
        more.model_files.push(file("/m/extra.bin", &"3".repeat(64)));
        let d = differences(&more, &base());
        assert_eq!(
            fields(&d),
            vec![("model file /m/extra.bin", Kind::NotComparable)]
        );
        assert_eq!(
            (d[0].candidate.as_str(), d[0].baseline.as_str()),
            ("333333333333", ABSENT)
        );
        let d = differences(&base(), &more);
        assert_eq!(
            (d[0].candidate.as_str(), d[0].baseline.as_str()),
            (ABSENT, "333333333333")
        );
    }

    #[test]
    fn serve_arguments_and_workload_make_runs_not_comparable() {
        let mut c = base();
        c.serve_argv.as_mut().unwrap()[6] = "4".into();
        c.workload_sha256 = "v".repeat(64);
        let d = differences(&c, &base());
        assert_eq!(
            fields(&d),
            vec![
                ("serve argv", Kind::NotComparable),
                ("workload", Kind::NotComparable)
            ]
        );
        assert_eq!(d[0].candidate, "… 4");
        assert_eq!(d[0].baseline, "… 2");
        assert_eq!(d[1].candidate, "vvvvvvvvvvvv");
        // An argument added in the middle; one with a space is quoted.
        let mut c = base();
        c.serve_argv
            .as_mut()
            .unwrap()
            .insert(3, "--alias=my model".into());
        let d = differences(&c, &base());
        assert_eq!(d[0].candidate, "… '--alias=my model' …");
        assert_eq!(d[0].baseline, "… (nothing) …");
        // Attached against launched.
        let mut attached = base();
        attached.serve_argv = None;
        attached.serve_program_at = None;
        let d = differences(&attached, &base());
        assert_eq!(d[0].field, "serve argv");
        assert_eq!(d[0].candidate, "attached, nothing launched");
        assert_eq!(d[0].baseline, "-m /m/x.gguf --port '{port}' -t 2");
    }

    #[test]
    fn under_a_hold_program_the_serve_program_is_still_left_out() {
        let hold = |serve: &str| {
            let mut p = base();
            p.serve_argv = Some(
                ["npu-hold", "--", serve, "-t", "2"]
                    .map(String::from)
                    .to_vec(),
            );
            p.serve_program_at = Some(2);
            p
        };
        assert!(differences(&hold("/rc4/serve"), &hold("/rc3/serve")).is_empty());
    }

    #[test]
    fn box_differences_name_what_allows_them() {
        let mut c = base();
        c.host = Some("box2".into());
        c.machine_id = None;
        c.cpu_model = Some("AMD Ryzen AI 9 HX 370".into());
        c.ncpu = Some(24);
        c.mem_total_kib = Some(64_000_000);
        c.kernel = Some("6.11.0-9-generic".into());
        c.modules.insert("amdxdna".into(), "srcversion X".into());
        c.modules.remove("intel_vpu");
        c.firmware
            .insert("amdxdna 0000:c5:00.1 fw_version".into(), "1.5.4.1".into());
        c.tool_version = "0.2.0".into();
        let d = differences(&c, &base());
        let host = Kind::Box(BoxFact::Host);
        let cpu = Kind::Box(BoxFact::Cpu);
        assert_eq!(
            fields(&d),
            vec![
                ("host", host),
                ("machine id", host),
                ("cpu model", cpu),
                ("cpus", cpu),
                ("memory", Kind::Box(BoxFact::Memory)),
                ("kernel", Kind::Box(BoxFact::Kernel)),
                ("module amdxdna", Kind::Box(BoxFact::Modules)),
                ("module intel_vpu", Kind::Box(BoxFact::Modules)),
                (
                    "firmware amdxdna 0000:c5:00.1 fw_version",
                    Kind::Box(BoxFact::Firmware)
                ),
                ("tool version", Kind::Box(BoxFact::Tool)),
            ]
        );
        assert_eq!(d[1].candidate, UNKNOWN);
        assert_eq!(d[6].baseline, ABSENT);
        assert_eq!(d[7].candidate, ABSENT);
        assert_eq!(d[4].candidate, "64000000 KiB");
        let allowed = parse_allow("host, kernel,cpu").unwrap();
        let left: Vec<_> = d
            .iter()
            .filter(|d| !d.allowed_by(&allowed))
            .map(|d| d.allow_name().unwrap())
            .collect();
        assert_eq!(
            left,
            vec!["memory", "modules", "modules", "firmware", "tool"]
        );
        assert_eq!(
            d[5].to_string(),
            "kernel: 6.11.0-9-generic (first run: 6.8.0-45-generic), box: kernel"
        );
        let json = serde_json::to_value(&d[0]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"field": "host", "kind": "box", "allow": "host", "candidate": "box2", "baseline": "box1"})
        );
    }

    #[test]
    fn allow_names_parse() {
        assert_eq!(
            parse_allow("host,kernel,cpu,modules,firmware,memory,tool,host").unwrap(),
            vec![
                BoxFact::Host,
                BoxFact::Kernel,
                BoxFact::Cpu,
                BoxFact::Modules,
                BoxFact::Firmware,
                BoxFact::Memory,
                BoxFact::Tool
            ]
        );
        assert_eq!(parse_allow("").unwrap(), vec![]);
        let e = parse_allow("host,gpu").unwrap_err();
        assert!(e.contains("\"gpu\"") && e.contains("firmware"), "{e}");
        for f in BoxFact::ALL {
            assert_eq!(BoxFact::from_name(f.name()), Some(f));
        }
    }
}
