//! The builtin list in `docs/shell.md` is the registry's.

use std::collections::BTreeSet;

/// The words of the first backquoted span after `marker` in the shell page (line breaks
/// count as spaces, so rewrapping the page does not break the test).
fn doc_list(marker: &str) -> BTreeSet<String> {
    let page = include_str!("../../../../docs/shell.md");
    let page = page.split_whitespace().collect::<Vec<_>>().join(" ");
    let start = page
        .find(marker)
        .unwrap_or_else(|| panic!("docs/shell.md has no `{marker}`"));
    let rest = &page[start + marker.len()..];
    let open = rest.find('`').expect("a backquoted list") + 1;
    let len = rest[open..]
        .find('`')
        .expect("the list's closing backquote");
    rest[open..open + len]
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn registry(keep: impl Fn(&wasmsand_shell::Builtin) -> bool) -> BTreeSet<String> {
    wasmsand_shell::builtin_table()
        .iter()
        .filter(|b| keep(b))
        .map(|b| b.name.to_string())
        .collect()
}

#[test]
fn docs_list_every_builtin_of_the_registry() {
    assert_eq!(doc_list("Builtins run in the host:"), registry(|_| true));
}

#[test]
fn docs_list_the_special_builtins_of_the_registry() {
    assert_eq!(
        doc_list("Special builtins, as bash 5.2 marks them (POSIX's and source):"),
        registry(|b| b.special)
    );
}

#[test]
fn docs_list_the_declaration_builtins_of_the_registry() {
    assert_eq!(
        doc_list("Declaration builtins:"),
        registry(|b| b.declaration)
    );
}
