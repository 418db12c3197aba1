//! chmod, written here because uu_chmod 0.12 is `#![cfg(unix)]` and compiles to nothing on
//! WASI. WASI has no permission bits, so under WASI chmod checks its arguments (mode syntax,
//! that every file exists) and succeeds without changing anything; natively it sets the mode.

use std::ffi::OsString;
use std::path::Path;

/// Applies an octal or symbolic mode (`u+x,go-w`, `a=r`, `+X`) to `old`.
fn apply_mode(spec: &str, old: u32, is_dir: bool) -> Option<u32> {
    if !spec.is_empty() && spec.chars().all(|c| c.is_digit(8)) {
        return u32::from_str_radix(spec, 8).ok().filter(|m| *m <= 0o7777);
    }
    let mut mode = old;
    for clause in spec.split(',') {
        let who_len = clause.chars().take_while(|c| "ugoa".contains(*c)).count();
        let (who, mut rest) = clause.split_at(who_len);
        let mut mask = 0;
        for c in who.chars() {
            mask |= match c {
                'u' => 0o4700,
                'g' => 0o2070,
                'o' => 0o1007,
                _ => 0o7777,
            };
        }
        let umask_default = who.is_empty();
        if umask_default {
            mask = 0o7777;
        }
        if rest.is_empty() {
            return None;
        }
        while !rest.is_empty() {
            let op = rest.chars().next()?;
            if !"+-=".contains(op) {
                return None;
            }
            rest = &rest[1..];
            let perm_len = rest.chars().take_while(|c| "rwxXst".contains(*c)).count();
            let (perms, tail) = rest.split_at(perm_len);
            rest = tail;
            let mut bits = 0;
            for c in perms.chars() {
                bits |= match c {
                    'r' => 0o444,
                    'w' => 0o222,
                    'x' => 0o111,
                    'X' if is_dir || old & 0o111 != 0 => 0o111,
                    'X' => 0,
                    's' => 0o6000,
                    't' => 0o1000,
                    _ => 0,
                };
            }
            // Without a `who`, the umask (022 here) filters what + and = grant.
            let grant = if umask_default {
                bits & mask & !0o022
            } else {
                bits & mask
            };
            match op {
                '+' => mode |= grant,
                '-' => mode &= !(bits & mask),
                _ => mode = (mode & !mask) | grant,
            }
        }
    }
    Some(mode & 0o7777)
}

fn errno_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}

// Under WASI the mode is only validated (by the caller), so `spec` just travels down.
#[cfg_attr(not(unix), allow(clippy::only_used_in_recursion))]
fn chmod_path(path: &Path, spec: &str, recursive: bool, verbose: bool, quiet: bool) -> bool {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => {
            if !quiet {
                eprintln!(
                    "chmod: cannot access '{}': {}",
                    path.display(),
                    errno_text(&e)
                );
            }
            return false;
        }
    };
    let mut ok = true;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let old = meta.permissions().mode() & 0o7777;
        if let Some(new) = apply_mode(spec, old, meta.is_dir())
            && let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(new))
        {
            if !quiet {
                eprintln!(
                    "chmod: changing permissions of '{}': {}",
                    path.display(),
                    errno_text(&e)
                );
            }
            ok = false;
        }
    }
    if verbose {
        println!("mode of '{}' retained", path.display());
    }
    if recursive
        && meta.is_dir()
        && let Ok(rd) = std::fs::read_dir(path)
    {
        let mut entries: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            ok &= chmod_path(&p, spec, recursive, verbose, quiet);
        }
    }
    ok
}

pub fn uumain(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
    let (mut recursive, mut verbose, mut quiet) = (false, false, false);
    let mut rest = Vec::new();
    let mut only_operands = false;
    for a in &args[1..] {
        if only_operands {
            rest.push(a.clone());
            continue;
        }
        match a.as_str() {
            "--" => only_operands = true,
            "-R" | "--recursive" => recursive = true,
            "-v" | "--verbose" | "-c" | "--changes" => verbose = a == "-v" || a == "--verbose",
            "-f" | "--silent" | "--quiet" => quiet = true,
            // `-w`, `-x`, `-rwx` are modes, not options.
            _ if a.starts_with('-') && a[1..].chars().all(|c| "rwxXst".contains(c)) => {
                rest.push(a.clone())
            }
            _ if a.starts_with("--") || (a.starts_with('-') && a.len() > 1) => {
                eprintln!("chmod: invalid option -- '{}'", a.trim_start_matches('-'));
                eprintln!("Try 'chmod --help' for more information.");
                return 1;
            }
            _ => rest.push(a.clone()),
        }
    }
    if rest.is_empty() {
        eprintln!("chmod: missing operand\nTry 'chmod --help' for more information.");
        return 1;
    }
    let spec = rest.remove(0);
    if rest.is_empty() {
        eprintln!(
            "chmod: missing operand after '{spec}'\nTry 'chmod --help' for more information."
        );
        return 1;
    }
    if apply_mode(&spec, 0o644, false).is_none() {
        eprintln!("chmod: invalid mode: '{spec}'\nTry 'chmod --help' for more information.");
        return 1;
    }
    let mut ok = true;
    for f in &rest {
        ok &= chmod_path(Path::new(f), &spec, recursive, verbose, quiet);
    }
    i32::from(!ok)
}

#[cfg(test)]
mod tests {
    use super::apply_mode;

    #[test]
    fn modes() {
        assert_eq!(apply_mode("755", 0, false), Some(0o755));
        assert_eq!(apply_mode("u+x", 0o644, false), Some(0o744));
        assert_eq!(apply_mode("+x", 0o644, false), Some(0o755));
        assert_eq!(apply_mode("go-rwx", 0o755, false), Some(0o700));
        assert_eq!(apply_mode("a=r,u+w", 0o777, false), Some(0o644));
        assert_eq!(apply_mode("bogus", 0o644, false), None);
    }
}
