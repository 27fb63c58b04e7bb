//! The rows in groups (by host, then by each group's oldest run; each group's runs oldest
//! first), and as the aligned table `compare` prints: a line naming each group above its runs,
//! then the archives changed after their run, the unreadable directories, and what each later
//! run's provenance differs in from the oldest run's.

use std::collections::HashMap;

use super::row::{GroupKey, Row};

/// Put `rows` in groups: by host, then by the group's oldest run; each group's runs oldest
/// first. Rows without a group (unreadable) keep their order, after the rest. Stable: rows of
/// one start keep the order given.
pub fn grouped(rows: Vec<Row>) -> Vec<Row> {
    let (mut readable, bad): (Vec<Row>, Vec<Row>) =
        rows.into_iter().partition(|r| r.group.is_some());
    readable.sort_by(|a, b| a.started_utc.cmp(&b.started_utc));
    // Each group's place: its host, its oldest run's start, and where that run stands in the
    // stable order above, so groups whose oldest runs started in the same second keep the
    // order they were given in (not the order of their keys' hashes).
    let mut first_start: HashMap<&GroupKey, (&Option<String>, usize)> = HashMap::new();
    for (i, r) in readable.iter().enumerate() {
        first_start
            .entry(r.group.as_ref().expect("partitioned"))
            .or_insert((&r.started_utc, i));
    }
    let order: HashMap<GroupKey, (String, Option<String>, usize)> = first_start
        .into_iter()
        .map(|(k, (s, i))| (k.clone(), (k.host.clone(), s.clone(), i)))
        .collect();
    readable.sort_by(|a, b| {
        let (ka, kb) = (a.group.as_ref().unwrap(), b.group.as_ref().unwrap());
        (&order[ka], &a.started_utc).cmp(&(&order[kb], &b.started_utc))
    });
    readable.extend(bad);
    readable
}

/// What each run after the oldest differs in from the oldest run's provenance, one line a
/// difference; empty when every run matches it.
pub fn differs(rows: &[Row]) -> String {
    let readable: Vec<&Row> = rows.iter().filter(|r| r.group.is_some()).collect();
    let Some(first) = readable.iter().copied().find(|r| r.oldest).or_else(|| {
        readable
            .iter()
            .copied()
            .min_by(|a, b| a.started_utc.cmp(&b.started_utc))
    }) else {
        return String::new();
    };
    if readable.len() < 2 {
        return String::new();
    }
    let mut lines = Vec::new();
    if first.recorded.is_none() {
        lines.push(format!(
            "  {}: no provenance recorded (a run from before it was): nothing to compare with",
            first.dir
        ));
    } else {
        let mut seen_first = false;
        for r in readable {
            if !seen_first && std::ptr::eq(r, first) {
                seen_first = true;
                continue;
            }
            match &r.differences {
                Some(d) => lines.extend(d.iter().map(|d| format!("  {}: {d}", r.dir))),
                None => lines.push(format!(
                    "  {}: no provenance recorded (a run from before it was)",
                    r.dir
                )),
            }
        }
    }
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "\ndiffers from the first run ({}):\n{}\n",
        first.dir,
        lines.join("\n")
    )
}

/// The rows as an aligned table, a line naming each group above its runs.
pub fn table(rows: &[Row]) -> String {
    let dash = || "-".to_string();
    let header: [String; 9] = [
        "started (UTC)".into(),
        "host".into(),
        "serve sha256".into(),
        "load before".into(),
        "serve CPU wait".into(),
        "median rate".into(),
        "median first token".into(),
        "RESULT".into(),
        "run".into(),
    ];
    // A group's line, or a run's cells.
    enum Line {
        Group(String),
        Cells([String; 9]),
    }
    let mut lines = vec![Line::Cells(header)];
    let mut unreadable = Vec::new();
    let mut changed = Vec::new();
    let mut current: Option<&GroupKey> = None;
    for r in rows {
        let Some(group) = &r.group else {
            let why = r.unreadable.as_deref().unwrap_or("no run.json");
            unreadable.push(format!("{}: unreadable: {why}", r.dir));
            continue;
        };
        if let Some(line) = &r.changed {
            changed.push(format!("{}: {line}", r.dir));
        }
        if current != Some(group) {
            lines.push(Line::Group(group.header()));
            current = Some(group);
        }
        lines.push(Line::Cells([
            r.started_utc.clone().unwrap_or_else(dash),
            r.host.clone().unwrap_or_else(dash),
            r.serve_sha256
                .as_ref()
                .map_or_else(dash, |s| s.chars().take(12).collect()),
            match (r.load1, r.ncpu) {
                (Some(l), Some(n)) => format!("{l:.1} on {n} CPUs"),
                _ => dash(),
            },
            r.serve_cpu_wait
                .map_or_else(dash, |w| format!("{:.0}%", w * 100.0)),
            r.median_rate_tok_s
                .map_or_else(dash, |v| format!("{v:.1} tok/s")),
            r.median_first_token_ms
                .map_or_else(dash, |v| format!("{v:.0} ms")),
            r.result.clone(),
            r.dir.clone(),
        ]));
    }
    let widths: Vec<usize> = (0..9)
        .map(|i| {
            lines
                .iter()
                .filter_map(|l| match l {
                    Line::Cells(c) => Some(c[i].chars().count()),
                    Line::Group(_) => None,
                })
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for l in &lines {
        match l {
            Line::Group(g) => out.push_str(g),
            Line::Cells(c) => {
                let line: Vec<String> = c
                    .iter()
                    .zip(&widths)
                    .map(|(s, w)| format!("{s:<w$}"))
                    .collect();
                out.push_str(line.join("  ").trim_end());
            }
        }
        out.push('\n');
    }
    for u in changed.into_iter().chain(unreadable) {
        out.push_str(&u);
        out.push('\n');
    }
    out.push_str(&differs(rows));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::compare::UNREADABLE;

    fn run(dir: &str, host: &str, serve: &str, model: Option<&str>, start: &str) -> Row {
        Row {
            dir: dir.into(),
            group: Some(GroupKey {
                host: host.into(),
                serve_sha256: Some(serve.repeat(64)),
                model_sha256: model.map(|m| m.repeat(64)),
            }),
            started_utc: Some(start.into()),
            host: Some(host.into()),
            result: "PASS".into(),
            ..Row::default()
        }
    }

    fn unreadable(dir: &str) -> Row {
        Row {
            dir: dir.into(),
            result: UNREADABLE.into(),
            unreadable: Some("garbage".into()),
            ..Row::default()
        }
    }

    fn dirs(rows: &[Row]) -> Vec<&str> {
        rows.iter().map(|r| r.dir.as_str()).collect()
    }

    #[test]
    fn groups_go_by_host_then_by_their_oldest_run_and_runs_oldest_first() {
        let rows = vec![
            unreadable("bad1"),
            run("b-new", "b", "1", None, "2026-11-05T00:00:00Z"),
            run("a-2nd-serve", "a", "2", None, "2026-11-02T00:00:00Z"),
            run("a-old", "a", "1", None, "2026-11-01T00:00:00Z"),
            unreadable("bad2"),
            run("b-old", "b", "1", None, "2026-10-01T00:00:00Z"),
            run("a-1st-serve-late", "a", "1", None, "2026-11-09T00:00:00Z"),
            run("a-model", "a", "2", Some("m"), "2026-11-03T00:00:00Z"),
        ];
        let g = grouped(rows);
        assert_eq!(
            dirs(&g),
            [
                // Host a before b though b's run is older; a's serve 1 first (its oldest run
                // is the oldest), its late run with it; then serve 2, then serve 2 with a
                // model recorded.
                "a-old",
                "a-1st-serve-late",
                "a-2nd-serve",
                "a-model",
                "b-old",
                "b-new",
                // The unreadable ones last, as given.
                "bad1",
                "bad2",
            ]
        );
    }

    #[test]
    fn runs_of_one_start_keep_the_order_given() {
        let rows = vec![
            run("x", "a", "1", None, "2026-11-01T00:00:00Z"),
            run("y", "a", "1", None, "2026-11-01T00:00:00Z"),
        ];
        assert_eq!(dirs(&grouped(rows.clone())), ["x", "y"]);
        let reversed: Vec<Row> = rows.into_iter().rev().collect();
        assert_eq!(dirs(&grouped(reversed)), ["y", "x"]);
    }

    #[test]
    fn groups_whose_oldest_runs_share_a_second_keep_the_order_given() {
        // Two models on one host in the same second (CI found this: the groups went by their
        // keys, and the second run's group came first).
        let rows = vec![
            run("x", "a", "2", Some("d"), "2026-11-01T00:00:00Z"),
            run("y", "a", "1", Some("c"), "2026-11-01T00:00:00Z"),
        ];
        assert_eq!(dirs(&grouped(rows.clone())), ["x", "y"]);
        let reversed: Vec<Row> = rows.into_iter().rev().collect();
        assert_eq!(dirs(&grouped(reversed)), ["y", "x"]);
    }

    #[test]
    fn the_table_names_each_group_above_its_runs() {
        let rows = grouped(vec![
            run("r1", "a", "1", None, "2026-11-01T00:00:00Z"),
            run("r2", "a", "1", None, "2026-11-02T00:00:00Z"),
            run("r3", "a", "2", Some("c"), "2026-11-03T00:00:00Z"),
            unreadable("bad"),
        ]);
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("started (UTC)"), "{t}");
        assert_eq!(
            lines[1], "host a / serve 111111111111 / model not recorded",
            "{t}"
        );
        assert!(lines[2].ends_with("r1") && lines[3].ends_with("r2"), "{t}");
        assert_eq!(lines[4], "host a / serve 222222222222 / model cccccccccccc");
        assert!(lines[5].ends_with("r3"), "{t}");
        assert_eq!(lines[6], "bad: unreadable: garbage");
    }
}
