//! Embedding wasmsand in a Rust program: put files in, run a pipeline and Python over them, try
//! several fixes in parallel forks of one prepared sandbox, and keep the one that works.
//!
//! Run it: `cargo run -q -p wasmsand --example embed`. `cargo test` runs it too (the test at
//! the end), so it cannot rot.

use std::thread;

use wasmsand::{Sandbox, SandboxOptions};

fn main() {
    match demo() {
        Ok(report) => print!("{report}"),
        Err(e) => {
            eprintln!("embed: {e}");
            std::process::exit(1);
        }
    }
}

fn demo() -> Result<String, Box<dyn std::error::Error>> {
    let mut report = String::new();
    let sb = Sandbox::new(SandboxOptions::default());

    // Files go in through the API; commands see them at once.
    sb.write_file(
        "/home/user/work/sales.csv",
        b"region,amount\nnorth,120\nsouth,80\nnorth,30\n",
    )?;
    let r = sb.run("cd /home/user/work && tail -n +2 sales.csv | cut -d, -f1 | sort | uniq -c")?;
    report.push_str(&format!("regions:\n{}", r.stdout));

    // Python runs over the same files, under the same limits.
    let r = sb.run(
        "cd /home/user/work && python3 -c 'import csv; rows = list(csv.DictReader(open(\"sales.csv\"))); \
         print(sum(int(r[\"amount\"]) for r in rows))'",
    )?;
    report.push_str(&format!("total: {}", r.stdout));

    // A failing check, prepared once...
    sb.write_file(
        "/home/user/work/check.sh",
        b"test \"$(cat /home/user/work/answer)\" = 42\n",
    )?;
    // ...then one fork per attempt, in parallel: each starts from the same state in O(1) and
    // none sees another's files.
    let attempts = [
        "echo 41 > /home/user/work/answer",
        "echo 42 > /home/user/work/answer",
        "true",
    ];
    let forks: Vec<Sandbox> = attempts
        .iter()
        .map(|_| sb.fork())
        .collect::<Result<_, _>>()?;
    let outcomes: Vec<(usize, i32)> = thread::scope(|s| {
        let handles: Vec<_> = forks
            .iter()
            .zip(attempts)
            .enumerate()
            .map(|(i, (fork, attempt))| {
                s.spawn(move || {
                    let code = fork
                        .run(&format!("{attempt}; bash /home/user/work/check.sh"))
                        .map_or(-1, |r| r.exit_code);
                    (i, code)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, code) in &outcomes {
        report.push_str(&format!("attempt {i}: exit {code}\n"));
    }
    // The parent never saw any attempt.
    let r = sb.run("test -e /home/user/work/answer && echo present || echo absent")?;
    report.push_str(&format!("parent: {}", r.stdout));
    Ok(report)
}

#[test]
fn the_example_runs() {
    let report = demo().expect("the example runs");
    assert_eq!(
        report,
        "regions:\n      2 north\n      1 south\ntotal: 230\n\
         attempt 0: exit 1\nattempt 1: exit 0\nattempt 2: exit 1\nparent: absent\n"
    );
}
