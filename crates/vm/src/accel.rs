//! KVM or TCG. `/dev/kvm` existing proves little (on some nested hosts a KVM guest hangs as
//! soon as its kernel runs), so KVM is used only after a probe boot: the kernel, no disk, must
//! reach its root mount and panic (`panic=-1` with `-no-reboot` then ends QEMU) within a few
//! seconds. The verdict is kept per host boot (`/proc/sys/kernel/random/boot_id`) in the
//! state directory, so only the first machine of a boot pays for it.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the caller asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AccelChoice {
    /// KVM when the probe boot works, else TCG.
    #[default]
    Auto,
    /// KVM or an error.
    Kvm,
    /// TCG (software emulation), never probing KVM.
    Tcg,
}

/// What a machine runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// The host's hardware virtualization.
    Kvm,
    /// QEMU's software emulation.
    Tcg,
}

impl Accel {
    /// `kvm` or `tcg`, as `status` and the logs name it.
    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// How long the probe's kernel may take to reach its root mount. A working KVM does it in
/// about a second even on a busy host.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Decides the acceleration for `choice`; the note says why (for the logs and `status`).
pub(crate) fn decide(
    choice: AccelChoice,
    qemu: &Path,
    kernel: &Path,
    state_dir: &Path,
) -> Result<(Accel, String), String> {
    if choice == AccelChoice::Tcg {
        return Ok((Accel::Tcg, "TCG as asked".into()));
    }
    let usable = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .map(|_| ())
        .map_err(|e| format!("/dev/kvm: {e}"));
    let verdict = match usable {
        Err(e) => Err(e),
        Ok(()) => cached_probe(qemu, kernel, state_dir),
    };
    match (verdict, choice) {
        (Ok(()), _) => Ok((Accel::Kvm, "KVM (its probe boot worked)".into())),
        (Err(why), AccelChoice::Kvm) => Err(format!("KVM asked for, but it is unusable: {why}")),
        (Err(why), _) => Ok((Accel::Tcg, format!("TCG: KVM is unusable here ({why})"))),
    }
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn cached_probe(qemu: &Path, kernel: &Path, state_dir: &Path) -> Result<(), String> {
    let file = state_dir.join(format!("kvm-probe-{}.json", boot_id()));
    if let Ok(text) = std::fs::read_to_string(&file)
        && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
    {
        return match v.get("ok").and_then(serde_json::Value::as_bool) {
            Some(true) => Ok(()),
            _ => Err(v
                .get("why")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("its probe boot failed earlier")
                .to_string()),
        };
    }
    let verdict = probe(qemu, kernel);
    let record = match &verdict {
        Ok(()) => serde_json::json!({ "ok": true }),
        Err(why) => serde_json::json!({ "ok": false, "why": why }),
    };
    let tmp = file.with_extension(format!("{}.tmp", std::process::id()));
    if std::fs::write(&tmp, record.to_string()).is_ok() {
        let _ = std::fs::rename(&tmp, &file);
    }
    verdict
}

/// Records that a KVM machine failed after its probe passed, so that later machines of this
/// host boot use TCG at once.
pub(crate) fn forget_kvm(state_dir: &Path, why: &str) {
    let file = state_dir.join(format!("kvm-probe-{}.json", boot_id()));
    let _ = std::fs::write(
        file,
        serde_json::json!({ "ok": false, "why": why }).to_string(),
    );
}

fn probe(qemu: &Path, kernel: &Path) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("wasmsand-kvm-probe-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let console = dir.join("console.log");
    let started = Instant::now();
    let child = Command::new(qemu)
        .args(["-nodefaults", "-no-user-config", "-display", "none"])
        .args([
            "-machine", "pc", "-accel", "kvm", "-cpu", "host", "-m", "256",
        ])
        .arg("-kernel")
        .arg(kernel)
        .args([
            "-append",
            "console=ttyS0 earlyprintk=serial,ttyS0 panic=-1 root=/dev/wasmsand-probe",
        ])
        .arg("-serial")
        .arg(format!("file:{}", console.display()))
        .arg("-no-reboot")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(format!("cannot start {}: {e}", qemu.display()));
        }
    };
    let verdict = loop {
        match child.try_wait() {
            Ok(Some(_)) => {
                let text = std::fs::read(&console).unwrap_or_default();
                let text = String::from_utf8_lossy(&text);
                if text.contains("Kernel panic") || text.contains("VFS:") {
                    break Ok(());
                }
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                break Err(format!(
                    "its probe boot ended without reaching the root mount{}",
                    err.lines()
                        .next()
                        .map(|l| format!(": {l}"))
                        .unwrap_or_default()
                ));
            }
            Ok(None) if started.elapsed() > PROBE_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                let printed = std::fs::metadata(&console).map(|m| m.len()).unwrap_or(0);
                break Err(format!(
                    "its probe boot hung ({} s, {printed} bytes of console)",
                    PROBE_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => break Err(e.to_string()),
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    verdict
}
