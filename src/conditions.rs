//! The box's conditions while a run measures: its load.
//!
//! A timing figure without the load it was taken under reads as a regression when the box was
//! merely busy; so every run records the load before the serve starts.

use sysinfo::{CpuRefreshKind, RefreshKind, System};

use crate::record::LoadSnapshot;

/// The load averages and CPU count now; `None` where the OS gives no CPU count.
pub fn load_snapshot(taken: &str) -> Option<LoadSnapshot> {
    let sys =
        System::new_with_specifics(RefreshKind::nothing().with_cpu(CpuRefreshKind::nothing()));
    let ncpu = sys.cpus().len();
    if ncpu == 0 {
        return None;
    }
    let avg = System::load_average();
    Some(LoadSnapshot {
        load1: avg.one,
        load5: avg.five,
        load15: avg.fifteen,
        ncpu,
        taken: taken.to_string(),
    })
}
