//! A container's cgroup, read from the host's cgroupfs: CPU time, the memory high-water mark,
//! OOM kills and refused forks of each run. The engine's stats API answers the first two as
//! well, but not per run and not the last two; it is the fallback when the files are not
//! reachable (a remote engine, or a layout not known here).

use std::path::{Path, PathBuf};

/// The files of one container's cgroup.
#[derive(Debug, Clone)]
pub struct Cgroup {
    layout: Layout,
}

#[derive(Debug, Clone)]
enum Layout {
    /// One directory per controller (`/sys/fs/cgroup/<ctl>/docker/<id>`).
    V1 {
        cpuacct: PathBuf,
        memory: PathBuf,
        pids: PathBuf,
    },
    /// One unified directory.
    V2(PathBuf),
}

/// Counters of a cgroup at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// CPU time of every process in it, in nanoseconds.
    pub cpu_ns: u64,
    /// Processes the kernel killed for memory.
    pub oom_kills: u64,
    /// Forks refused by the pids limit.
    pub pids_max_hits: u64,
}

impl Cgroup {
    /// The cgroup of container `id` under `root` (normally `/sys/fs/cgroup`), for the engine's
    /// `cgroupfs` or `systemd` driver; `None` when none of the known layouts has it.
    pub fn find(root: &Path, id: &str) -> Option<Cgroup> {
        let scope = format!("docker-{id}.scope");
        let v1 = |ctl: &str| {
            [
                root.join(ctl).join("docker").join(id),
                root.join(ctl).join("system.slice").join(&scope),
            ]
            .into_iter()
            .find(|p| p.is_dir())
        };
        if let (Some(cpuacct), Some(memory), Some(pids)) = (v1("cpuacct"), v1("memory"), v1("pids"))
        {
            return Some(Cgroup {
                layout: Layout::V1 {
                    cpuacct,
                    memory,
                    pids,
                },
            });
        }
        [
            root.join("docker").join(id),
            root.join("system.slice").join(&scope),
        ]
        .into_iter()
        .find(|p| p.join("cgroup.controllers").is_file())
        .map(|p| Cgroup {
            layout: Layout::V2(p),
        })
    }

    /// The counters now; a file that cannot be read counts as 0.
    pub fn sample(&self) -> Sample {
        match &self.layout {
            Layout::V1 {
                cpuacct,
                memory,
                pids,
            } => Sample {
                cpu_ns: read_number(&cpuacct.join("cpuacct.usage")).unwrap_or(0),
                oom_kills: keyed(&memory.join("memory.oom_control"), "oom_kill").unwrap_or(0),
                pids_max_hits: keyed(&pids.join("pids.events"), "max").unwrap_or(0),
            },
            Layout::V2(dir) => Sample {
                cpu_ns: keyed(&dir.join("cpu.stat"), "usage_usec").unwrap_or(0) * 1000,
                oom_kills: keyed(&dir.join("memory.events"), "oom_kill").unwrap_or(0),
                pids_max_hits: keyed(&dir.join("pids.events"), "max").unwrap_or(0),
            },
        }
    }

    /// Resets the memory high-water mark so that the next reading is one run's own; false
    /// when the kernel or the permissions do not allow it (the mark then covers the
    /// container's whole life).
    pub fn reset_peak(&self) -> bool {
        let file = match &self.layout {
            Layout::V1 { memory, .. } => memory.join("memory.max_usage_in_bytes"),
            Layout::V2(dir) => dir.join("memory.peak"),
        };
        std::fs::write(file, "0").is_ok()
    }

    /// The memory high-water mark in bytes.
    pub fn peak_bytes(&self) -> Option<u64> {
        match &self.layout {
            Layout::V1 { memory, .. } => read_number(&memory.join("memory.max_usage_in_bytes")),
            Layout::V2(dir) => read_number(&dir.join("memory.peak")),
        }
    }
}

fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The value of `key` in a flat-keyed cgroup file (`key value` lines).
fn keyed(path: &Path, key: &str) -> Option<u64> {
    parse_keyed(&std::fs::read_to_string(path).ok()?, key)
}

fn parse_keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_files_are_read_by_key() {
        let oom = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(parse_keyed(oom, "oom_kill"), Some(3));
        assert_eq!(parse_keyed(oom, "oom"), None);
        assert_eq!(parse_keyed("max 12\n", "max"), Some(12));
    }

    #[test]
    fn both_layouts_are_found_and_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let id = "abc";
        for (ctl, file, text) in [
            ("cpuacct", "cpuacct.usage", "1500000000\n"),
            (
                "memory",
                "memory.oom_control",
                "oom_kill_disable 0\noom_kill 2\n",
            ),
            ("memory", "memory.max_usage_in_bytes", "1048576\n"),
            ("pids", "pids.events", "max 5\n"),
        ] {
            let d = root.join(ctl).join("docker").join(id);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(file), text).unwrap();
        }
        let cg = Cgroup::find(root, id).unwrap();
        assert_eq!(
            cg.sample(),
            Sample {
                cpu_ns: 1_500_000_000,
                oom_kills: 2,
                pids_max_hits: 5
            }
        );
        assert_eq!(cg.peak_bytes(), Some(1 << 20));
        assert!(Cgroup::find(root, "other").is_none());

        let v2 = tempfile::tempdir().unwrap();
        let d = v2.path().join("system.slice").join("docker-xyz.scope");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        std::fs::write(d.join("cpu.stat"), "usage_usec 250\nuser_usec 200\n").unwrap();
        std::fs::write(d.join("memory.events"), "low 0\noom 1\noom_kill 1\n").unwrap();
        let cg = Cgroup::find(v2.path(), "xyz").unwrap();
        assert_eq!(cg.sample().cpu_ns, 250_000);
        assert_eq!(cg.sample().oom_kills, 1);
    }
}
