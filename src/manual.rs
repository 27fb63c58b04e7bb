//! The manual pages, made from the command line's own definition (clap_mangen), so they never
//! drift from `--help`: `npu-serve-smoke.1` and one page a command, `npu-serve-smoke-run.1`
//! and so on, as git and cargo name theirs. The Debian package and the release tarballs ship
//! what `npu-serve-smoke man --out DIR` writes (tools/package-assets.sh).

use std::path::Path;

use anyhow::{Context, Result};

use crate::build_info;

/// Every page: (file name, roff). The hidden commands (the supervisor) have none.
pub fn pages(cmd: clap::Command) -> Result<Vec<(String, Vec<u8>)>> {
    let cmd = built(cmd);
    let mut out = Vec::new();
    add(&cmd, &mut out)?;
    Ok(out)
}

/// The command's own page alone (what `man` prints), its subcommands' not rendered.
pub fn page(cmd: clap::Command) -> Result<Vec<u8>> {
    Ok(render(&built(cmd))?.1)
}

/// The command as the pages describe it: built (so subcommands carry their full names, as
/// `npu-serve-smoke-run`), without clap's `help` subcommand.
fn built(cmd: clap::Command) -> clap::Command {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    cmd
}

fn add(cmd: &clap::Command, out: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    out.push(render(cmd)?);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        add(sub, out)?;
    }
    Ok(())
}

/// One command's page: (file name, roff).
fn render(cmd: &clap::Command) -> Result<(String, Vec<u8>)> {
    let man = clap_mangen::Man::new(cmd.clone())
        // The build's date, not the day the page was rendered: a rebuilt package is the same.
        .date(build_info::BUILD_DATE)
        .source(format!("npu-serve-smoke {}", build_info::VERSION))
        .manual("npu-serve-smoke manual");
    let mut roff = Vec::new();
    man.render(&mut roff)?;
    Ok((man.get_filename(), roff))
}

/// Write every page into `dir` (made if missing), each file atomically.
pub fn write_pages(cmd: clap::Command, dir: &Path) -> Result<Vec<String>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    let mut names = Vec::new();
    for (name, roff) in pages(cmd)? {
        let mut tmp = tempfile::NamedTempFile::new_in(dir)
            .with_context(|| format!("cannot write into {}", dir.display()))?;
        std::io::Write::write_all(&mut tmp, &roff)?;
        let path = dir.join(&name);
        tmp.persist(&path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        names.push(name);
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_for_the_command_and_each_visible_command_none_for_the_supervisor() {
        let pages = pages(crate::cli::command()).unwrap();
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        for want in [
            "npu-serve-smoke.1",
            "npu-serve-smoke-run.1",
            "npu-serve-smoke-judge.1",
            "npu-serve-smoke-stand-in.1",
            "npu-serve-smoke-self-test.1",
            "npu-serve-smoke-compare.1",
            "npu-serve-smoke-completions.1",
            "npu-serve-smoke-man.1",
        ] {
            assert!(names.contains(&want), "{want} not in {names:?}");
        }
        assert!(!names.iter().any(|n| n.contains("supervise")), "{names:?}");
        // run's page carries run's own flags and the exit codes of its help.
        let run = &pages
            .iter()
            .find(|(n, _)| n == "npu-serve-smoke-run.1")
            .unwrap()
            .1;
        let run = String::from_utf8_lossy(run);
        assert!(run.contains("\n.TH npu-serve-smoke-run 1 "), "{run}");
        assert!(run.contains("first\\-token\\-ms"), "{run}");
        assert!(run.contains(build_info::BUILD_DATE), "{run}");
        // What `man` prints is the command's own page, the first of them.
        assert_eq!(page(crate::cli::command()).unwrap(), pages[0].1);
        assert_eq!(pages[0].0, "npu-serve-smoke.1");
    }
}
