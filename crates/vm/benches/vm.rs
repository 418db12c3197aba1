//! VM figures, printed (no assertions): a cold boot (boot + save, in a fresh state
//! directory), a start that restores the saved machine, `reset`, and `echo hi` round trips
//! (after a pause, when the agent's spare shell is ready, and back to back, when it is not).
//!
//! Needs QEMU and an image (`sandboxd images build vm`):
//! `WASMSAND_VM_IMAGE=PATH cargo bench --profile dev -p wasmsand-vm --bench vm [-- RUNS]`
//! (default 20). `WASMSAND_VM_ACCEL=tcg|kvm` forces the acceleration.

use std::time::{Duration, Instant};

use wasmsand_vm::{AccelChoice, Machine, MachineConfig, RunRequest};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn summary(name: &str, mut v: Vec<f64>) {
    v.sort_by(f64::total_cmp);
    let pct = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{name:<34} median {:>8.1} ms   p90 {:>8.1} ms   min {:>8.1} ms   ({} runs)",
        pct(0.5),
        pct(0.9),
        v[0],
        v.len()
    );
}

fn echo(m: &Machine) -> f64 {
    let t = Instant::now();
    let mut out = Vec::new();
    let o = m
        .run(
            &RunRequest::new("echo hi", Duration::from_secs(30)),
            &mut |_, b| out.extend_from_slice(b),
        )
        .expect("echo runs");
    assert_eq!((o.exit_code, out.as_slice()), (Some(0), &b"hi\n"[..]));
    ms(t.elapsed())
}

fn main() {
    let Some(image) = std::env::var_os("WASMSAND_VM_IMAGE") else {
        eprintln!("set WASMSAND_VM_IMAGE to an image (sandboxd images build vm)");
        std::process::exit(2);
    };
    let runs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20);
    let state = tempfile::tempdir().expect("a state directory");
    let config = || {
        let mut c = MachineConfig::new(&image);
        c.state_dir = state.path().to_path_buf();
        c.accel = match std::env::var("WASMSAND_VM_ACCEL").as_deref() {
            Ok("tcg") => AccelChoice::Tcg,
            Ok("kvm") => AccelChoice::Kvm,
            _ => AccelChoice::Auto,
        };
        c
    };

    let t = Instant::now();
    let m = Machine::start(config()).expect("the machine starts");
    let total = t.elapsed();
    let r = m.report().clone();
    println!("accel: {} ({})", r.accel.name(), r.accel_note);
    println!(
        "cold start (probe + boot + save + restore): {:.0} ms, of which boot + save {:.0} ms",
        ms(total),
        r.cold_boot.map(ms).unwrap_or(0.0)
    );
    m.shutdown();
    drop(m);

    let mut starts = Vec::new();
    let mut restores = Vec::new();
    for _ in 0..runs.clamp(1, 10) {
        let t = Instant::now();
        let m = Machine::start(config()).expect("the machine restores");
        starts.push(ms(t.elapsed()));
        restores.push(ms(m.report().restore));
        m.shutdown();
    }
    summary("start from the saved machine", starts);
    summary("  of which the restore", restores);

    let m = Machine::start(config()).expect("the machine restores");
    let mut resets = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        m.reset().expect("reset");
        resets.push(ms(t.elapsed()));
    }
    summary("reset", resets);

    let mut paused = Vec::new();
    for _ in 0..runs {
        std::thread::sleep(Duration::from_millis(1500));
        paused.push(echo(&m));
    }
    summary("echo hi (spare shell ready)", paused);
    let mut back = Vec::new();
    for _ in 0..runs {
        back.push(echo(&m));
    }
    summary("echo hi (back to back)", back);
    let mut status = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        assert!(m.status().ready);
        status.push(ms(t.elapsed()));
    }
    summary("status (an agent round trip)", status);
    m.shutdown();
}
