//! QEMU's command line and process: the one place that knows either.
//!
//! Every QEMU runs in a directory of its own (sockets, console log, its copy-on-write disk
//! layer), removed when it ends. QEMUs are started by one long-lived thread per machine
//! through `setpriv --pdeathsig KILL`, so that a host process that dies without cleaning up
//! (SIGKILL) takes its QEMUs with it; directories left by a host process that is gone are
//! swept, and their QEMUs killed, by the next machine that starts.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::time::Duration;

use crate::accel::Accel;

/// The virtio-serial port's name, which the agent looks for.
pub(crate) const AGENT_PORT: &str = "org.wasmsand.agent";

/// What a machine is made of; the same for the boot that saves a machine and every restore
/// of it (QEMU loads a saved machine only into the same devices).
#[derive(Debug, Clone)]
pub(crate) struct Hardware {
    pub(crate) qemu: PathBuf,
    pub(crate) accel: Accel,
    pub(crate) memory_mb: u64,
    pub(crate) cpus: u32,
    pub(crate) kernel: PathBuf,
    pub(crate) initrd: PathBuf,
    pub(crate) image: PathBuf,
}

/// How the guest's RAM starts.
pub(crate) enum Start<'a> {
    /// Booted from the kernel; RAM is `ram`, mapped shared so that it can be saved as it is.
    ColdBoot { ram: &'a Path },
    /// Restored: RAM mapped privately from a saved `ram` (never written), devices loaded from
    /// a migration stream over QMP afterwards (`-incoming defer`).
    Restore { ram: &'a Path },
}

/// The kernel's command line. `quiet` keeps the console to warnings and errors (the console
/// log is what a failed boot reports); `mitigations=off` because the guest's processes are
/// one tenant's, and the boundary is the machine, while the mitigations cost dearly under
/// emulation; no keyboard, mouse or spare serial ports to probe.
const KERNEL_CMDLINE: &str = "console=ttyS0 panic=-1 quiet mitigations=off \
     i8042.nokbd i8042.noaux 8250.nr_uarts=1 random.trust_cpu=on";

/// Added under TCG: without address-space randomization every process maps its programs
/// and libraries at the same addresses, and QEMU's translation cache (keyed by the guest's
/// virtual addresses) reuses what earlier processes translated. With it, each process's code
/// is translated anew: `bash -c 'echo hi'` cost 25 ms instead of 16. Under KVM nothing is
/// translated, so the guest keeps its randomization.
const TCG_CMDLINE: &str = " norandmaps";

/// QEMU option values escape a comma by doubling it.
fn opt_path(p: &Path) -> String {
    p.display().to_string().replace(',', ",,")
}

impl Hardware {
    /// Everything of the command line that decides whether a saved machine can be restored:
    /// part of the saved machine's key.
    pub(crate) fn fingerprint(&self) -> String {
        format!(
            "{} accel={} memory={} cpus={} cmdline={} devices=pc,virtio-blk,virtio-serial,virtio-rng,serial",
            self.qemu.display(),
            self.accel.name(),
            self.memory_mb,
            self.cpus,
            self.cmdline(),
        )
    }

    pub(crate) fn cmdline(&self) -> String {
        match self.accel {
            Accel::Kvm => KERNEL_CMDLINE.to_string(),
            Accel::Tcg => format!("{KERNEL_CMDLINE}{TCG_CMDLINE}"),
        }
    }

    pub(crate) fn args(&self, dir: &Path, start: &Start<'_>) -> Vec<OsString> {
        let mut a: Vec<String> = vec![
            "-nodefaults".into(),
            "-no-user-config".into(),
            "-display".into(),
            "none".into(),
            "-name".into(),
            "wasmsand-vm".into(),
            "-machine".into(),
            "pc,memory-backend=ram0".into(),
        ];
        match self.accel {
            Accel::Kvm => a.extend(["-accel".into(), "kvm".into(), "-cpu".into(), "host".into()]),
            // A bounded translation cache: the default (1 GiB) would let QEMU's resident
            // memory grow far past the guest's.
            Accel::Tcg => a.extend([
                "-accel".into(),
                "tcg,tb-size=128".into(),
                "-cpu".into(),
                "max".into(),
            ]),
        }
        let (ram, share) = match start {
            Start::ColdBoot { ram } => (ram, "on"),
            Start::Restore { ram } => (ram, "off"),
        };
        a.extend([
            "-smp".into(),
            self.cpus.to_string(),
            "-m".into(),
            format!("{}M", self.memory_mb),
            "-object".into(),
            format!(
                "memory-backend-file,id=ram0,size={}M,mem-path={},share={share}",
                self.memory_mb,
                opt_path(ram)
            ),
            "-kernel".into(),
            self.kernel.display().to_string(),
            "-initrd".into(),
            self.initrd.display().to_string(),
            "-append".into(),
            self.cmdline(),
            // The image opened read-only under a temporary copy-on-write layer (in TMPDIR,
            // which is this QEMU's directory); the guest's flushes need not reach the host's
            // disk, since nothing of it outlives the machine.
            "-drive".into(),
            format!(
                "file={},format=raw,if=none,id=root,snapshot=on,cache=unsafe",
                opt_path(&self.image)
            ),
            "-device".into(),
            "virtio-blk-pci,drive=root".into(),
            "-device".into(),
            "virtio-serial-pci".into(),
            "-chardev".into(),
            format!(
                "socket,id=agent,path={},server=on,wait=off",
                opt_path(&dir.join("agent.sock"))
            ),
            "-device".into(),
            format!("virtserialport,chardev=agent,name={AGENT_PORT}"),
            "-device".into(),
            "virtio-rng-pci".into(),
            "-chardev".into(),
            format!(
                "file,id=console,path={}",
                opt_path(&dir.join("console.log"))
            ),
            "-serial".into(),
            "chardev:console".into(),
            "-qmp".into(),
            format!(
                "unix:{},server=on,wait=off",
                opt_path(&dir.join("qmp.sock"))
            ),
            "-pidfile".into(),
            dir.join("qemu.pid").display().to_string(),
            // A reboot or a kernel panic (panic=-1) ends QEMU: the host sees it and restores.
            "-no-reboot".into(),
        ]);
        if matches!(start, Start::Restore { .. }) {
            a.extend(["-incoming".into(), "defer".into()]);
        }
        a.into_iter().map(OsString::from).collect()
    }
}

/// A running QEMU and its directory; killed and removed when dropped.
pub(crate) struct Qemu {
    child: Mutex<Child>,
    pub(crate) dir: PathBuf,
}

impl Qemu {
    /// Whether QEMU still runs.
    pub(crate) fn alive(&self) -> bool {
        matches!(
            self.child
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .try_wait(),
            Ok(None)
        )
    }

    /// Waits up to `timeout` for QEMU to exit by itself.
    pub(crate) fn wait_exit(&self, timeout: Duration) -> bool {
        let until = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < until {
            if !self.alive() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        !self.alive()
    }

    pub(crate) fn kill(&self) {
        let mut c = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let _ = c.kill();
        let _ = c.wait();
    }

    /// The last lines of the guest's console and of QEMU's own messages: what a failed boot
    /// or restore reports.
    pub(crate) fn diagnostics(&self) -> String {
        let mut out = String::new();
        for (name, what) in [("qemu.log", "QEMU"), ("console.log", "console")] {
            let text = std::fs::read(self.dir.join(name)).unwrap_or_default();
            let text = String::from_utf8_lossy(&text);
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            if lines.is_empty() {
                continue;
            }
            let tail = &lines[lines.len().saturating_sub(12)..];
            out.push_str(&format!(
                "\n--- {what} (last lines) ---\n{}",
                tail.join("\n")
            ));
        }
        out
    }
}

impl Drop for Qemu {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

type SpawnJob = (Command, Sender<std::io::Result<Child>>);

/// Starts QEMUs from one thread that lives as long as the machine: `PR_SET_PDEATHSIG` fires
/// when the thread that started a process ends, so that thread must not be a short-lived
/// worker's.
pub(crate) struct Spawner {
    tx: Mutex<Option<Sender<SpawnJob>>>,
    run_dir: PathBuf,
    setpriv: bool,
}

static INSTANCE: AtomicU64 = AtomicU64::new(0);

impl Spawner {
    pub(crate) fn new(run_dir: PathBuf) -> std::io::Result<Spawner> {
        std::fs::create_dir_all(&run_dir)?;
        sweep(&run_dir);
        let (tx, rx) = channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("vm-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })?;
        let setpriv = Command::new("setpriv")
            .arg("--help")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        Ok(Spawner {
            tx: Mutex::new(Some(tx)),
            run_dir,
            setpriv,
        })
    }

    /// Starts QEMU for `hw` in a new directory.
    pub(crate) fn start(&self, hw: &Hardware, start: Start<'_>) -> Result<Qemu, String> {
        let n = INSTANCE.fetch_add(1, Ordering::Relaxed);
        let dir = self.run_dir.join(format!("{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let log = std::fs::File::create(dir.join("qemu.log"))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let args = hw.args(&dir, &start);
        let mut cmd = if self.setpriv {
            let mut c = Command::new("setpriv");
            c.arg("--pdeathsig").arg("KILL").arg("--").arg(&hw.qemu);
            c
        } else {
            Command::new(&hw.qemu)
        };
        cmd.args(&args)
            .env("TMPDIR", &dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let (reply_tx, reply_rx) = channel();
        let sent = self
            .tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|tx| tx.send((cmd, reply_tx)).is_ok())
            .unwrap_or(false);
        if !sent {
            let _ = std::fs::remove_dir_all(&dir);
            return Err("the machine is shut down".into());
        }
        let child = match reply_rx.recv() {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!(
                    "cannot start {} ({e}); install Debian's qemu-system-x86 package",
                    hw.qemu.display()
                ));
            }
            Err(_) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err("the machine's spawner thread is gone".into());
            }
        };
        Ok(Qemu {
            child: Mutex::new(child),
            dir,
        })
    }

    /// Ends the spawner thread (after the machine's last QEMU).
    pub(crate) fn close(&self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

/// Removes the directories of host processes that are gone, killing a QEMU still running in
/// one (it is that directory's when its command line names it).
fn sweep(run_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(run_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name
            .to_str()
            .and_then(|n| n.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if owner == std::process::id() || Path::new(&format!("/proc/{owner}")).exists() {
            continue;
        }
        let dir = entry.path();
        if let Some(qpid) = std::fs::read_to_string(dir.join("qemu.pid"))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        {
            let cmdline = std::fs::read(format!("/proc/{qpid}/cmdline")).unwrap_or_default();
            let needle = dir.display().to_string();
            if String::from_utf8_lossy(&cmdline).contains(&needle) {
                let _ = Command::new("kill")
                    .arg("-KILL")
                    .arg(qpid.to_string())
                    .status();
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The first line of `qemu --version`: part of a saved machine's key, since a saved machine
/// loads only into the QEMU that saved it.
pub(crate) fn version(qemu: &Path) -> Result<String, String> {
    let out = Command::new(qemu)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            format!(
                "cannot run {} ({e}); install Debian's qemu-system-x86 package",
                qemu.display()
            )
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commas_in_paths_are_escaped_and_restores_wait_for_their_state() {
        let hw = Hardware {
            qemu: "qemu-system-x86_64".into(),
            accel: Accel::Tcg,
            memory_mb: 128,
            cpus: 1,
            kernel: "/k".into(),
            initrd: "/i".into(),
            image: "/images/a,b.img".into(),
        };
        let dir = Path::new("/run/x");
        let cold: Vec<String> = hw
            .args(
                dir,
                &Start::ColdBoot {
                    ram: Path::new("/s/ram"),
                },
            )
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert!(cold.iter().any(|a| a.starts_with("file=/images/a,,b.img,")));
        assert!(cold.iter().any(|a| a.ends_with("mem-path=/s/ram,share=on")));
        assert!(!cold.iter().any(|a| a == "-incoming"));
        let restore: Vec<String> = hw
            .args(
                dir,
                &Start::Restore {
                    ram: Path::new("/s/ram"),
                },
            )
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert!(restore.iter().any(|a| a.ends_with("share=off")));
        assert!(restore.windows(2).any(|w| w == ["-incoming", "defer"]));
    }
}
