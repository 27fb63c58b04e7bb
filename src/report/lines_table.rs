//! The table of the verdict's lines, one row a line, as docs/lines.md shows it: made from
//! [`Check`] (its name, kind, timing set and summary), so the docs cannot list a line the code
//! lacks, miss one it has, or call a judged line info (issue 53: the README's hand-kept table
//! was at its length limit, and the next line would have broken it).

use crate::archive::check::{Check, Kind};

/// The opening and closing markers of the made table in a Markdown page. What lies between
/// them is the code's to write; `tests/docs.rs` holds docs/lines.md's equal to [`table`].
pub const BEGIN: &str =
    "<!-- the lines' table: made by report::lines_table from src/archive/check.rs; \
                         UPDATE_DOCS=1 cargo test --test integration -- docs:: rewrites it -->";
pub const END: &str = "<!-- end of the lines' table -->";

/// What a line is, in the table's second column: `judged`, `judged, timing` (a busy box may
/// explain its failure) or `info` (said, never judged).
pub fn kind_word(check: Check) -> &'static str {
    match (check.kind(), Check::TIMING.contains(&check)) {
        (Kind::Info, _) => "info",
        (Kind::Judged, true) => "judged, timing",
        (Kind::Judged, false) => "judged",
    }
}

/// The table in Markdown, every check in the verdict's order, with a header row.
pub fn table() -> String {
    let mut out = String::from("| line | is | what it holds the run to |\n| --- | --- | --- |\n");
    for check in Check::ALL {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            check.name(),
            kind_word(check),
            check.summary()
        ));
    }
    out
}

/// `page` with the text between its markers replaced by [`table`]; `None` when the page does
/// not hold the two markers, in order, once each.
pub fn rewrite(page: &str) -> Option<String> {
    let (before, rest) = page.split_once(BEGIN)?;
    let (_, after) = rest.split_once(END)?;
    if after.contains(BEGIN) || after.contains(END) || before.contains(END) {
        return None;
    }
    Some(format!("{before}{BEGIN}\n{}{END}{after}", table()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_has_one_row_in_order_with_its_kind() {
        let table = table();
        let rows: Vec<&str> = table.lines().skip(2).collect();
        assert_eq!(rows.len(), Check::ALL.len());
        for (row, check) in rows.iter().zip(Check::ALL) {
            let cells: Vec<&str> = row.split(" | ").collect();
            assert_eq!(cells[0], format!("| `{check}`"), "{row}");
            assert_eq!(cells[1], kind_word(check), "{row}");
        }
        assert_eq!(kind_word(Check::Rate), "judged, timing");
        assert_eq!(kind_word(Check::Content), "judged");
        assert_eq!(kind_word(Check::Load), "info");
        assert_eq!(kind_word(Check::Goodput), "judged, timing");
    }

    #[test]
    fn a_summary_keeps_to_one_cell_and_leaves_info_to_the_kind() {
        for check in Check::ALL {
            let s = check.summary();
            // A bare `|` would open a cell of its own; a newline would end the row.
            assert!(!s.contains('|') && !s.contains('\n'), "{check}: {s}");
            assert!(!s.is_empty() && s.trim() == s, "{check}: {s:?}");
            assert!(
                !s.starts_with("info"),
                "{check}: the kind column says info: {s}"
            );
        }
    }

    #[test]
    fn rewrite_replaces_only_between_the_markers() {
        let page = format!("# Lines\n\nbefore\n{BEGIN}\nold table\n{END}\nafter\n");
        let made = rewrite(&page).unwrap();
        assert!(made.starts_with("# Lines\n\nbefore\n"));
        assert!(made.ends_with(&format!("{END}\nafter\n")));
        assert!(made.contains(&table()) && !made.contains("old table"));
        // Made twice, the same page: the rewrite is a fixed point.
        assert_eq!(rewrite(&made).unwrap(), made);
        assert_eq!(rewrite("no markers"), None);
        assert_eq!(rewrite(&format!("{END}\n{BEGIN}\n")), None);
        assert_eq!(rewrite(&format!("{BEGIN}\n{END}\n{BEGIN}\n{END}\n")), None);
    }
}
