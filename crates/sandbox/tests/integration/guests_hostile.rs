//! Every guest program, run with hostile arguments and input (unknown options, binary garbage,
//! a byte-order mark, 10 000-deep JSON, numbers past any integer type, an empty argument), must
//! answer as a tool does: a message in its own words and a status. Never a Rust panic, an
//! allocation-failure note, a trap (the shell's status 134) or a debug-formatted error.

use wasmsand::{Sandbox, SandboxOptions};

/// Programs of `commands.txt` that exist to test the sandbox itself (they spin, allocate and
/// flood on purpose).
const TEST_GUESTS: &[&str] = &["spin", "alloc", "flood"];

/// Argument lists; `IN` is replaced by each input file's name.
const ARGS: &[&str] = &[
    "--no-such-option",
    "-Z -Q",
    "IN",
    "IN IN",
    "''",
    "99999999999999999999999999999 -99999999999999999999 IN",
    "-n 99999999999999999999999 IN",
    "-w -1 IN",
    ". IN",
    "-- -",
];

/// What no user may ever see from a guest.
const SYMPTOMS: &[&str] = &[
    "panicked at",
    "RUST_BACKTRACE",
    "memory allocation of",
    "program crashed",
    "Os { code",
    "stack backtrace",
    "called `Result::unwrap()`",
    "called `Option::unwrap()`",
];

fn inputs(sb: &Sandbox) {
    let mut garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    garbage.extend_from_slice(b"\xff\xfe\x00\x00\xc3\x28\xe2\x82\n\r\n\x1b[31m");
    sb.write_file("/home/user/h/garbage.bin", &garbage).unwrap();
    sb.write_file(
        "/home/user/h/bom.txt",
        "\u{feff}{\"a\": [1, 2]}\n\u{feff}line two\n".as_bytes(),
    )
    .unwrap();
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    sb.write_file("/home/user/h/deep.json", deep.as_bytes())
        .unwrap();
    sb.write_file(
        "/home/user/h/huge.txt",
        b"99999999999999999999999999999999999999 1e999999 -1e999999 0x7fffffffffffffffff\n",
    )
    .unwrap();
}

#[test]
fn no_guest_shows_its_implementation_on_hostile_input() {
    let commands: Vec<&str> = include_str!("../../../../wasm-tools/commands.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| !TEST_GUESTS.contains(c))
        .collect();
    assert!(commands.len() > 60, "commands.txt read: {commands:?}");
    let sb = Sandbox::new(SandboxOptions::default());
    inputs(&sb);
    let r = sb
        .run("cd /home/user/h && wc -c < garbage.bin && wc -c < deep.json")
        .unwrap();
    assert_eq!(
        r.stdout, "4112\n20000\n",
        "the inputs are in place: {}",
        r.stderr
    );
    let mut failures = Vec::new();
    for cmd in &commands {
        // One run per program: each line is one invocation, its stdout thrown away (a tool
        // that echoes input forever is cut by head), its status and stderr reported.
        let mut script = String::from("cd /home/user/h\n");
        for input in ["garbage.bin", "bom.txt", "deep.json", "huge.txt"] {
            for args in ARGS {
                let args = args.replace("IN", input);
                script += &format!(
                    "timeout 5 {cmd} {args} < {input} 2>/home/user/h/err | head -c 65536 >/dev/null\n\
                     s=${{PIPESTATUS[0]}}\n\
                     printf '@@ %s %s\\n' \"$s\" {line:?}\n\
                     cat /home/user/h/err\n",
                    line = format!("{cmd} {args} < {input}"),
                );
            }
        }
        // A fork per program: `rm IN`, `mv IN IN` and `truncate` must not change what the
        // next program is given.
        let r = sb.fork().unwrap().run(&script).unwrap();
        let mut current: Option<(String, String)> = None;
        let mut check = |case: Option<(String, String)>, stderr: &str| {
            if let Some((status, line)) = case {
                let hit = SYMPTOMS.iter().find(|s| stderr.contains(*s));
                if status == "134" || hit.is_some() {
                    failures.push(format!("{line}: status {status}\n{stderr}"));
                }
            }
        };
        let mut stderr = String::new();
        for l in r.stdout.lines() {
            if let Some(rest) = l.strip_prefix("@@ ") {
                check(current.take(), &stderr);
                stderr.clear();
                let (status, line) = rest.split_once(' ').unwrap_or((rest, ""));
                current = Some((status.to_string(), line.to_string()));
            } else {
                stderr += l;
                stderr.push('\n');
            }
        }
        check(current.take(), &stderr);
        assert!(
            r.stdout.matches("@@ ").count() == 4 * ARGS.len(),
            "{cmd}: the run ended early (status {}): {}",
            r.exit_code,
            r.stderr
        );
    }
    assert!(
        failures.is_empty(),
        "{} hostile invocations showed the implementation:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
