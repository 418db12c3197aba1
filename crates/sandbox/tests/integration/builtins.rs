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
    let expected: String = names
        .iter()
        .map(|n| format!("builtin\n{n} is a shell builtin\n"))
        .collect();
    assert_eq!(r.stdout, expected);

    for b in table {
        let r = sb.run(&format!("help -s '{}'", b.name)).unwrap();
        match b.synopsis {
            Some(s) => {
                assert_eq!(r.exit_code, 0, "help -s {}: {}", b.name, r.stderr);
                assert_eq!(r.stdout, format!("{}: {s}\n", b.name));
            }
            None => assert_eq!(r.exit_code, 1, "help -s {} should find nothing", b.name),
        }
    }
}
