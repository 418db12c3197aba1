//! A block of a doc page that a registry in the code generates: the text between
//! `<!-- NAME:begin -->` and `<!-- NAME:end -->` must be what the registry renders, so a table
//! edited by hand in the docs (or a registry changed without its docs) fails a test.
//! `WASMSAND_BLESS=1` rewrites the block from the registry instead of failing.

use std::path::Path;

/// Checks (or, under `WASMSAND_BLESS=1`, rewrites) block `name` of `page` against `generated`.
pub fn check(page: &Path, name: &str, generated: &str) {
    let text = std::fs::read_to_string(page)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", page.display()));
    let begin = format!("<!-- {name}:begin -->\n");
    let end = format!("<!-- {name}:end -->");
    let start = text
        .find(&begin)
        .unwrap_or_else(|| panic!("{} has no `{}` marker", page.display(), begin.trim()))
        + begin.len();
    let stop = start
        + text[start..]
            .find(&end)
            .unwrap_or_else(|| panic!("{} has no `{end}` marker", page.display()));
    if text[start..stop] == *generated {
        return;
    }
    if std::env::var_os("WASMSAND_BLESS").is_some_and(|v| v == "1") {
        let updated = format!("{}{generated}{}", &text[..start], &text[stop..]);
        std::fs::write(page, updated)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", page.display()));
        return;
    }
    panic!(
        "{} block `{name}` is not what the registry renders; the registry in the code is the \
         one list (edit it, not the page), then rerun with WASMSAND_BLESS=1 to rewrite the \
         block.\n--- in the page:\n{}\n--- from the registry:\n{generated}",
        page.display(),
        &text[start..stop]
    );
}
