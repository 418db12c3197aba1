//! The shell's builtin registry is what the shell runs: every builtin it lists is one to
//! `type -t` and `command -V`, and `help -s` prints the synopsis it carries.

use wasmsand::{Sandbox, SandboxOptions};

#[test]
fn every_registered_builtin_is_a_builtin_to_type_command_and_help() {
    let sb = Sandbox::new(SandboxOptions::default());
    let table = wasmsand_shell::builtin_table();
    let names: Vec<&str> = table.iter().map(|b| b.name).collect();
    let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    let script = format!(
        "for b in {}; do type -t \"$b\"; command -V \"$b\"; done",
        quoted.join(" ")
    );
    let r = sb.run(&script).unwrap();
    assert_eq!(r.exit_code, 0, "{}", r.stderr);
    // A command that is a program in bash shows as the file bash would run, when the
    // sandbox has one along $PATH (it still runs as the builtin).
    let file = |n: &str| {
        let walk = format!(
            "IFS=:; for d in $PATH; do [ -f \"$d/{n}\" ] && [ -x \"$d/{n}\" ] && {{ echo \"$d/{n}\"; break; }}; done"
        );
        let r = sb.run(&walk).unwrap();
        (r.exit_code == 0 && r.stdout.starts_with('/')).then(|| r.stdout.trim().to_string())
    };
    // `time` is GNU time's program and, first, bash's keyword.
    let expected: String = table
        .iter()
        .map(|b| match b.program.then(|| file(b.name)).flatten() {
            _ if b.name == "time" => "keyword\ntime is a shell keyword\n".to_string(),
            Some(path) => format!("file\n{} is {path}\n", b.name),
            None => format!("builtin\n{} is a shell builtin\n", b.name),
        })
        .collect();
    assert_eq!(r.stdout, expected);
    // The programs that have a file are shown as files: at least env and xargs do.
    assert!(expected.contains("env is /") && expected.contains("xargs is /"));

    for b in table {
        let r = sb.run(&format!("help -s '{}'", b.name)).unwrap();
        match b.synopsis {
            Some(s) => {
                assert_eq!(r.exit_code, 0, "help -s {}: {}", b.name, r.stderr);
                assert_eq!(r.stdout, format!("{}: {s}\n", b.name));
            }
            // A program is no help topic, but its name may begin others (`sh`: shift and
            // shopt, as bash's second pass finds them); `time` is bash's keyword.
            None => {
                let own = format!("{}: ", b.name);
                let is_topic = r.stdout.lines().any(|l| l.starts_with(&own));
                assert_eq!(
                    is_topic,
                    b.name == "time",
                    "help -s {}: {}",
                    b.name,
                    r.stdout
                );
            }
        }
    }
}
