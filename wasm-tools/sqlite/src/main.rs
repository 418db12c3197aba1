//! `sqlite3`: the SQLite command-line shell's common use, on the real SQLite engine (the C
//! amalgamation bundled by `libsqlite3-sys`, compiled for wasm32-wasip1 by clang).
//!
//! Database files live in the sandbox's filesystem like any other file, so its byte and file
//! limits bound them and their journals: a write past a limit is SQLite's `database or disk is
//! full`. WASI has no advisory locks, so files are opened through SQLite's `unix-none` VFS (no
//! locking at all; the `unix-dotfile` default would leave a `.lock` directory behind when a run
//! is killed, locking the database for good). Two processes writing one database at the same
//! time can therefore corrupt it, as on a filesystem without locks.

mod output;

use std::ffi::{CStr, CString, c_char, c_int};
use std::io::Read;
use std::ptr;

use libsqlite3_sys as ffi;
use output::{Mode, Printer};

const HELP: &str = "\
Usage: sqlite3 [OPTIONS] [FILENAME [SQL...]]
FILENAME is the name of an SQLite database. A new database is created
if the file does not previously exist. Defaults to :memory:.
Each SQL argument (or dot-command, starting with '.') runs in order;
without any, SQL and dot-commands are read from standard input.
OPTIONS include:
   -bail                stop after hitting an error
   -box                 set output mode to 'box'
   -column              set output mode to 'column'
   -cmd COMMAND         run \"COMMAND\" before reading stdin
   -csv                 set output mode to 'csv'
   -[no]header          turn headers on or off
   -help                show this message
   -json                set output mode to 'json'
   -line                set output mode to 'line'
   -list                set output mode to 'list'
   -markdown            set output mode to 'markdown'
   -newline SEP         set output row separator. Default: '\\n'
   -nullvalue TEXT      set text string for NULL values. Default ''
   -quote               set output mode to 'quote'
   -readonly            open the database read-only
   -separator SEP       set output column separator. Default: '|'
   -table               set output mode to 'table'
   -tabs                set output mode to 'tabs'
   -version             show SQLite version
Dot-commands: .tables .schema .import .mode .headers .separator .nullvalue
.read .dump .print .show .help .quit .exit
Files are opened without locking (WASI has none): one writer at a time.
";

const DOT_HELP: &str = "\
.dump ?TABLE?            Render database content as SQL
.exit ?CODE?             Exit this program with return-code CODE
.headers on|off          Turn display of headers on or off
.help                    Show this message
.import FILE TABLE       Import data from FILE into TABLE (--csv, --skip N)
.mode MODE ?TABLE?       Set output mode: box csv column insert json line list
                         markdown quote table tabs
.nullvalue STRING        Use STRING in place of NULL values
.print STRING...         Print literal STRING
.quit                    Exit this program
.read FILE               Read input from FILE
.schema ?PATTERN?        Show the CREATE statements matching PATTERN
.separator COL ?ROW?     Change the column and row separators
.show                    Show the current values for various settings
.tables ?PATTERN?        List names of tables matching LIKE pattern PATTERN
";

fn main() {
    guest_rt::enter_pwd();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = run(args);
    output::flush();
    std::process::exit(code);
}

/// Why a batch stopped.
enum Stop {
    /// An error was reported; the shell carries on (or bails).
    Error,
    /// `.exit N`.
    Exit(i32),
    /// `.quit`: the end of input (the status tells whether anything failed).
    Quit,
}

struct Shell {
    db: *mut ffi::sqlite3,
    p: Printer,
    bail: bool,
    /// Whether errors name the input line ("Parse error near line N") as for stdin and
    /// `.read`, or not (SQL given as arguments).
    from_lines: bool,
    /// SQLite's result code of the last failed statement: sqlite3 exits with it when SQL
    /// given as an argument fails while running (19 for a constraint, say).
    last_rc: i32,
    file: String,
}

fn run(args: Vec<String>) -> i32 {
    let mut p = Printer::default();
    let mut file: Option<String> = None;
    let mut sql: Vec<String> = Vec::new();
    let mut cmds: Vec<String> = Vec::new();
    let mut bail = false;
    let mut readonly = false;
    let mut it = args.into_iter();
    let mut no_more_options = false;
    while let Some(a) = it.next() {
        if no_more_options || !a.starts_with('-') || a == "-" {
            if file.is_none() {
                file = Some(a);
            } else {
                sql.push(a);
            }
            continue;
        }
        // Both `-opt` and `--opt` are accepted, as sqlite3 does.
        let opt = a.trim_start_matches('-');
        let mut value = |name: &str| -> Option<String> {
            let v = it.next();
            if v.is_none() {
                eprintln!("sqlite3: Error: missing argument to -{name}");
            }
            v
        };
        match opt {
            "" => no_more_options = true,
            "help" => {
                output::out(HELP.as_bytes());
                return 0;
            }
            "version" => {
                output::out(format!("{}\n", version()).as_bytes());
                return 0;
            }
            "bail" => bail = true,
            "batch" | "interactive" | "nofollow" | "safe" => {}
            "readonly" => readonly = true,
            "header" | "headers" => p.header = true,
            "noheader" | "noheaders" => p.header = false,
            "separator" => match value(opt) {
                Some(v) => p.col_sep = unescape(&v),
                None => return 1,
            },
            "newline" => match value(opt) {
                Some(v) => p.row_sep = unescape(&v),
                None => return 1,
            },
            "nullvalue" => match value(opt) {
                Some(v) => p.null = unescape(&v),
                None => return 1,
            },
            "cmd" => match value(opt) {
                Some(v) => cmds.push(v),
                None => return 1,
            },
            "init" => match value(opt) {
                Some(v) => cmds.push(format!(".read {v}")),
                None => return 1,
            },
            m => match Mode::parse(m) {
                Some(mode) => p.set_mode(mode, false),
                None => {
                    eprintln!(
                        "sqlite3: Error: unknown option: {a}\nUse -help for a list of options."
                    );
                    return 1;
                }
            },
        }
    }
    let file = file.unwrap_or_else(|| ":memory:".into());
    let db = match open(&file, readonly) {
        Ok(db) => db,
        Err(msg) => {
            eprintln!("Error: unable to open database \"{file}\": {msg}");
            return 1;
        }
    };
    let mut sh = Shell {
        db,
        p,
        bail,
        from_lines: false,
        last_rc: 1,
        file: file.clone(),
    };
    let mut rc = 0;
    for c in &cmds {
        match sh.one_arg(c) {
            Ok(()) => {}
            Err(Stop::Exit(code)) => return code,
            Err(Stop::Quit) => return 0,
            Err(Stop::Error) => return sh.last_rc,
        }
    }
    if sql.is_empty() {
        let mut input = Vec::new();
        if let Err(e) = std::io::stdin().lock().read_to_end(&mut input) {
            eprintln!("sqlite3: cannot read standard input: {e}");
            return 1;
        }
        sh.from_lines = true;
        match sh.lines(&input) {
            Ok(ok) => rc = i32::from(!ok),
            Err(Stop::Exit(code)) => rc = code,
            Err(Stop::Quit) => rc = 0,
            Err(Stop::Error) => rc = 1,
        }
    } else {
        for s in &sql {
            match sh.one_arg(s) {
                Ok(()) => {}
                Err(Stop::Exit(code)) => return code,
                Err(Stop::Quit) => return 0,
                Err(Stop::Error) => return sh.last_rc,
            }
        }
    }
    // SAFETY: the handle came from sqlite3_open_v2 and every statement has been finalized.
    unsafe { ffi::sqlite3_close(sh.db) };
    rc
}

fn version() -> String {
    // SAFETY: both return static NUL-terminated strings.
    unsafe {
        format!(
            "{} {}",
            CStr::from_ptr(ffi::sqlite3_libversion()).to_string_lossy(),
            CStr::from_ptr(ffi::sqlite3_sourceid()).to_string_lossy()
        )
    }
}

fn open(file: &str, readonly: bool) -> Result<*mut ffi::sqlite3, String> {
    let name = CString::new(file).map_err(|_| "NUL in file name".to_string())?;
    let mut flags = ffi::SQLITE_OPEN_URI;
    flags |= if readonly {
        ffi::SQLITE_OPEN_READONLY
    } else {
        ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_CREATE
    };
    let vfs = c"unix-none";
    let mut db = ptr::null_mut();
    // SAFETY: valid NUL-terminated strings; `db` receives the handle (or an error handle).
    let rc = unsafe { ffi::sqlite3_open_v2(name.as_ptr(), &mut db, flags, vfs.as_ptr()) };
    if rc != ffi::SQLITE_OK {
        let msg = errmsg(db);
        // SAFETY: a failed open still returns a handle to close (or NULL, which is allowed).
        unsafe { ffi::sqlite3_close(db) };
        return Err(msg);
    }
    Ok(db)
}

fn errmsg(db: *mut ffi::sqlite3) -> String {
    // SAFETY: sqlite3_errmsg returns a string owned by the handle, valid until the next call.
    unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(db)) }
        .to_string_lossy()
        .into_owned()
}

/// `\t`, `\n`, `\r`, `\\` and `\"` in separators, as sqlite3 reads them.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

fn is_complete(sql: &str) -> bool {
    let Ok(c) = CString::new(sql) else {
        return true;
    };
    // SAFETY: a valid NUL-terminated string.
    unsafe { ffi::sqlite3_complete(c.as_ptr()) != 0 }
}

impl Shell {
    /// One command-line argument: a dot-command or SQL.
    fn one_arg(&mut self, arg: &str) -> Result<(), Stop> {
        if arg.starts_with('.') {
            self.dot(arg, 0)
        } else {
            self.exec(arg, 0)
        }
    }

    /// Lines of input (stdin or `.read`): dot-commands on their own lines, SQL run each time
    /// the text gathered so far ends a statement. `Ok(false)` when some command failed.
    fn lines(&mut self, input: &[u8]) -> Result<bool, Stop> {
        let text = String::from_utf8_lossy(input);
        let mut ok = true;
        let mut pending = String::new();
        let mut start_line = 0;
        for (n, line) in text.lines().enumerate() {
            let lineno = n + 1;
            let trimmed = line.trim_start();
            if pending.is_empty() {
                if trimmed.starts_with('.') {
                    match self.dot(trimmed, lineno) {
                        Ok(()) => {}
                        Err(Stop::Error) if !self.bail => ok = false,
                        Err(Stop::Quit) => return if ok { Err(Stop::Quit) } else { Ok(false) },
                        Err(e) => return Err(e),
                    }
                    continue;
                }
                if only_comments(trimmed) {
                    continue;
                }
                start_line = lineno;
            }
            pending.push_str(line);
            pending.push('\n');
            if is_complete(&pending) {
                let batch = std::mem::take(&mut pending);
                match self.exec(&batch, start_line) {
                    Ok(()) => {}
                    Err(Stop::Error) if !self.bail => ok = false,
                    Err(e) => return Err(e),
                }
            }
        }
        if !pending.trim().is_empty() {
            // What sqlite3 does with an unterminated last statement: run it anyway.
            match self.exec(&pending, start_line) {
                Ok(()) => {}
                Err(Stop::Error) if !self.bail => ok = false,
                Err(e) => return Err(e),
            }
        }
        Ok(ok)
    }

    /// Runs every statement of `sql`, printing rows; stops at the first error.
    fn exec(&mut self, sql: &str, lineno: usize) -> Result<(), Stop> {
        let Ok(c) = CString::new(sql) else {
            self.report("in prepare, ", "NUL character in SQL", lineno, None);
            return Err(Stop::Error);
        };
        let mut tail: *const c_char = c.as_ptr();
        loop {
            // SAFETY: `tail` points into `c`, which lives for the loop.
            let rest = unsafe { CStr::from_ptr(tail) };
            if rest.to_bytes().iter().all(|b| b.is_ascii_whitespace()) {
                return Ok(());
            }
            let mut stmt: *mut ffi::sqlite3_stmt = ptr::null_mut();
            let mut next: *const c_char = ptr::null();
            // SAFETY: valid handle and NUL-terminated text; -1 reads up to the NUL.
            let rc = unsafe { ffi::sqlite3_prepare_v2(self.db, tail, -1, &mut stmt, &mut next) };
            if rc != ffi::SQLITE_OK {
                let msg = errmsg(self.db);
                // SAFETY: valid handle.
                let offset = unsafe { ffi::sqlite3_error_offset(self.db) };
                let ctx =
                    (offset >= 0).then(|| (rest.to_string_lossy().trim_end().to_string(), offset));
                self.last_rc = 1;
                self.report("in prepare, ", &msg, lineno, ctx);
                return Err(Stop::Error);
            }
            tail = next;
            if stmt.is_null() {
                // A comment or an empty statement.
                continue;
            }
            let result = self.step_all(stmt);
            // SAFETY: `stmt` came from prepare and is finalized once.
            unsafe { ffi::sqlite3_finalize(stmt) };
            if let Err((rc, msg)) = result {
                self.last_rc = rc & 0xff;
                self.report("stepping, ", &msg, lineno, None);
                return Err(Stop::Error);
            }
        }
    }

    fn step_all(&mut self, stmt: *mut ffi::sqlite3_stmt) -> Result<(), (i32, String)> {
        // SAFETY (whole function): `stmt` is a live prepared statement of `self.db`; column
        // pointers are read before the next step, as SQLite requires.
        let ncol = unsafe { ffi::sqlite3_column_count(stmt) } as usize;
        let names: Vec<String> = (0..ncol)
            .map(|i| unsafe { cstr_lossy(ffi::sqlite3_column_name(stmt, i as c_int)) })
            .collect();
        let mut rows: Vec<Vec<output::Value>> = Vec::new();
        let mut streamed = 0usize;
        loop {
            let rc = unsafe { ffi::sqlite3_step(stmt) };
            match rc {
                ffi::SQLITE_ROW => {
                    let row: Vec<output::Value> = (0..ncol)
                        .map(|i| unsafe { value(stmt, i as c_int) })
                        .collect();
                    if self.p.mode.columnar() {
                        rows.push(row);
                    } else {
                        self.p.row(&names, &row, streamed);
                        streamed += 1;
                    }
                }
                ffi::SQLITE_DONE => break,
                _ => {
                    if streamed > 0 {
                        self.p.end(&names, streamed);
                    }
                    return Err((rc, errmsg(self.db)));
                }
            }
        }
        if self.p.mode.columnar() {
            if !rows.is_empty() {
                self.p.table(&names, &rows);
            }
        } else if streamed > 0 {
            self.p.end(&names, streamed);
        }
        Ok(())
    }

    /// An error as sqlite3 prints it: `Error: in prepare, MSG` for arguments, `Parse error
    /// near line N: MSG` for lines, with the statement and a caret where SQLite points.
    fn report(&self, kind: &str, msg: &str, lineno: usize, ctx: Option<(String, c_int)>) {
        output::flush();
        let context = ctx.map(|(sql, off)| error_context(&sql, off as usize));
        let context = context.unwrap_or_default();
        if self.from_lines {
            let what = if kind.starts_with("stepping") {
                "Runtime error"
            } else {
                "Parse error"
            };
            eprintln!("{what} near line {lineno}: {msg}{context}");
        } else {
            eprintln!("Error: {kind}{msg}{context}");
        }
    }

    fn query_strings(&self, sql: &str, params: &[&str]) -> Result<Vec<Vec<String>>, String> {
        let c = CString::new(sql).map_err(|_| "NUL in SQL".to_string())?;
        let mut stmt = ptr::null_mut();
        // SAFETY: valid handle and SQL; the statement is finalized below on every path.
        let rc =
            unsafe { ffi::sqlite3_prepare_v2(self.db, c.as_ptr(), -1, &mut stmt, ptr::null_mut()) };
        if rc != ffi::SQLITE_OK {
            return Err(errmsg(self.db));
        }
        let texts: Vec<CString> = params
            .iter()
            .map(|p| CString::new(*p).unwrap_or_default())
            .collect();
        let mut out = Vec::new();
        let result = unsafe {
            for (i, t) in texts.iter().enumerate() {
                ffi::sqlite3_bind_text(
                    stmt,
                    i as c_int + 1,
                    t.as_ptr(),
                    -1,
                    ffi::SQLITE_TRANSIENT(),
                );
            }
            let ncol = ffi::sqlite3_column_count(stmt);
            loop {
                match ffi::sqlite3_step(stmt) {
                    ffi::SQLITE_ROW => out.push(
                        (0..ncol)
                            .map(|i| cstr_lossy(ffi::sqlite3_column_text(stmt, i).cast()))
                            .collect(),
                    ),
                    ffi::SQLITE_DONE => break Ok(out),
                    _ => break Err(errmsg(self.db)),
                }
            }
        };
        // SAFETY: prepared above, finalized once.
        unsafe { ffi::sqlite3_finalize(stmt) };
        result
    }

    fn dot(&mut self, line: &str, lineno: usize) -> Result<(), Stop> {
        let words = match split_dot(line) {
            Some(w) => w,
            None => {
                eprintln!("Error: unterminated quote in {line}");
                return Err(Stop::Error);
            }
        };
        let cmd = words[0].trim_start_matches('.');
        let args = &words[1..];
        let fail = |msg: String| {
            output::flush();
            eprintln!("{msg}");
            Err(Stop::Error)
        };
        match cmd {
            "quit" | "q" => Err(Stop::Quit),
            "exit" => Err(Stop::Exit(
                args.first().and_then(|a| a.parse().ok()).unwrap_or(0),
            )),
            "help" => {
                output::out(DOT_HELP.as_bytes());
                Ok(())
            }
            "headers" | "header" | "h" => match args.first().map(String::as_str) {
                Some(v) => {
                    self.p.header = matches!(v, "on" | "1" | "yes" | "true");
                    Ok(())
                }
                None => fail("Usage: .headers on|off".into()),
            },
            "mode" => match args.first() {
                None => {
                    output::out(
                        format!("current output mode: {}\n", self.p.mode.name()).as_bytes(),
                    );
                    Ok(())
                }
                Some(m) => match Mode::parse(m) {
                    Some(mode) => {
                        self.p.set_mode(mode, true);
                        if mode == Mode::Insert {
                            self.p.insert_table =
                                args.get(1).cloned().unwrap_or("\"table\"".into());
                        }
                        Ok(())
                    }
                    None => fail(
                        "Error: mode should be one of: box column csv insert json line list \
                         markdown quote table tabs"
                            .into(),
                    ),
                },
            },
            "separator" => match args {
                [col] => {
                    self.p.col_sep = unescape(col);
                    Ok(())
                }
                [col, row] => {
                    self.p.col_sep = unescape(col);
                    self.p.row_sep = unescape(row);
                    Ok(())
                }
                _ => fail("Usage: .separator COL ?ROW?".into()),
            },
            "nullvalue" => match args {
                [v] => {
                    self.p.null = unescape(v);
                    Ok(())
                }
                _ => fail("Usage: .nullvalue STRING".into()),
            },
            "print" => {
                output::out(format!("{}\n", args.join(" ")).as_bytes());
                Ok(())
            }
            "show" => {
                let text = format!(
                    "        echo: off\n         eqp: off\n     explain: auto\n     headers: {}\n        mode: {}\n   nullvalue: \"{}\"\n      output: stdout\ncolseparator: \"{}\"\nrowseparator: \"{}\"\n       stats: off\n       width: \n    filename: {}\n",
                    if self.p.header { "on" } else { "off" },
                    self.p.mode.name(),
                    self.p.null,
                    self.p.col_sep.escape_default(),
                    self.p.row_sep.escape_default(),
                    self.file,
                );
                output::out(text.as_bytes());
                Ok(())
            }
            "tables" | "table" => self.tables(args.first().map(String::as_str)),
            "schema" => self.schema(args.first().map(String::as_str)),
            "read" => match args {
                [file] => match std::fs::read(file) {
                    Ok(data) => {
                        let was = self.from_lines;
                        self.from_lines = true;
                        let r = self.lines(&data);
                        self.from_lines = was;
                        match r {
                            Ok(true) => Ok(()),
                            Ok(false) => Err(Stop::Error),
                            Err(e) => Err(e),
                        }
                    }
                    Err(e) => fail(format!("Error: cannot open \"{file}\": {}", errno_text(&e))),
                },
                _ => fail("Usage: .read FILE".into()),
            },
            "import" => self.import(args, lineno),
            "dump" => self.dump(args.first().map(String::as_str)),
            _ => fail(format!(
                "Error: unknown command or invalid arguments:  \"{cmd}\". Enter \".help\" for help"
            )),
        }
    }

    fn tables(&mut self, pattern: Option<&str>) -> Result<(), Stop> {
        let names = match self.query_strings(
            "SELECT name FROM sqlite_schema WHERE type IN ('table','view') \
             AND name NOT LIKE 'sqlite_%' AND name LIKE ?1 ORDER BY 1",
            &[pattern.unwrap_or("%")],
        ) {
            Ok(rows) => rows
                .into_iter()
                .map(|mut r| r.remove(0))
                .collect::<Vec<_>>(),
            Err(msg) => {
                eprintln!("Error: {msg}");
                return Err(Stop::Error);
            }
        };
        if names.is_empty() {
            return Ok(());
        }
        // Columns across an 80-character line, filled top to bottom, as sqlite3 lays them out.
        let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
        let ncol = (80 / (width + 2)).max(1);
        let nrow = names.len().div_ceil(ncol);
        let mut text = String::new();
        for i in 0..nrow {
            let mut j = i;
            while j < names.len() {
                if j >= nrow {
                    text.push_str("  ");
                }
                text.push_str(&format!("{:<width$}", names[j]));
                j += nrow;
            }
            text.push('\n');
        }
        output::out(text.as_bytes());
        Ok(())
    }

    fn schema(&mut self, pattern: Option<&str>) -> Result<(), Stop> {
        let rows = match self.query_strings(
            "SELECT sql, type, name FROM sqlite_schema WHERE sql IS NOT NULL \
             AND name NOT LIKE 'sqlite_%' AND (tbl_name LIKE ?1 OR name LIKE ?1) \
             ORDER BY rowid",
            &[pattern.unwrap_or("%")],
        ) {
            Ok(rows) => rows,
            Err(msg) => {
                eprintln!("Error: {msg}");
                return Err(Stop::Error);
            }
        };
        let mut text = String::new();
        for row in rows {
            text.push_str(&row[0]);
            if row[1] == "view" {
                // sqlite3 notes a view's columns under its definition.
                let cols = self
                    .query_strings("SELECT name FROM pragma_table_info(?1)", &[&row[2]])
                    .unwrap_or_default();
                let cols: Vec<String> = cols
                    .into_iter()
                    .map(|mut c| quote_ident(&c.remove(0)))
                    .collect();
                text.push_str(&format!(
                    "\n/* {}({}) */",
                    quote_ident(&row[2]),
                    cols.join(",")
                ));
            }
            text.push_str(";\n");
        }
        output::out(text.as_bytes());
        Ok(())
    }

    /// `.import [--csv] [--skip N] FILE TABLE`: CSV (or the current separator) into TABLE,
    /// creating it from the first row's names when it does not exist.
    fn import(&mut self, args: &[String], _lineno: usize) -> Result<(), Stop> {
        let mut skip = 0usize;
        let mut csv = self.p.mode == Mode::Csv;
        let mut pos = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--csv" => csv = true,
                "--ascii" => csv = false,
                "--skip" => skip = it.next().and_then(|n| n.parse().ok()).unwrap_or(0),
                "-v" | "--schema" => {}
                _ => pos.push(a.clone()),
            }
        }
        let [file, table] = pos.as_slice() else {
            eprintln!("Usage: .import FILE TABLE");
            return Err(Stop::Error);
        };
        let data = match std::fs::read(file) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("Error: cannot open \"{file}\"");
                let _ = e;
                return Err(Stop::Error);
            }
        };
        let sep = if csv {
            b','
        } else {
            self.p.col_sep.bytes().next().unwrap_or(b'|')
        };
        let text = String::from_utf8_lossy(&data);
        let records = parse_delimited(&text, sep as char);
        let mut records = records.into_iter().skip(skip);
        let exists = self
            .query_strings(
                "SELECT 1 FROM sqlite_schema WHERE type IN ('table','view') AND name = ?1",
                &[table],
            )
            .map(|r| !r.is_empty())
            .unwrap_or(false);
        let ncols;
        if !exists {
            let Some((_, header)) = records.next() else {
                return Ok(());
            };
            let cols: Vec<String> = header
                .iter()
                .map(|c| format!("\"{}\" TEXT", c.replace('"', "\"\"")))
                .collect();
            // The statement sqlite3 itself writes, so that `.schema` shows the same.
            let create = format!(
                "CREATE TABLE IF NOT EXISTS \"{}\"(\n{})",
                table.replace('"', "\"\""),
                cols.join(", ")
            );
            self.exec(&create, 0)?;
            ncols = header.len();
        } else {
            match self.query_strings("SELECT count(*) FROM pragma_table_info(?1)", &[table]) {
                Ok(r) => ncols = r[0][0].parse().unwrap_or(0),
                Err(msg) => {
                    eprintln!("Error: {msg}");
                    return Err(Stop::Error);
                }
            }
        }
        if ncols == 0 {
            return Ok(());
        }
        let placeholders = vec!["?"; ncols].join(",");
        let insert = format!(
            "INSERT INTO \"{}\" VALUES({placeholders})",
            table.replace('"', "\"\"")
        );
        let c = CString::new(insert).unwrap_or_default();
        let mut stmt = ptr::null_mut();
        // SAFETY (the block): valid handle; the statement is finalized on every path below.
        unsafe {
            if ffi::sqlite3_prepare_v2(self.db, c.as_ptr(), -1, &mut stmt, ptr::null_mut())
                != ffi::SQLITE_OK
            {
                eprintln!("Error: {}", errmsg(self.db));
                return Err(Stop::Error);
            }
            let in_tx = ffi::sqlite3_get_autocommit(self.db) != 0;
            if in_tx {
                ffi::sqlite3_exec(
                    self.db,
                    c"BEGIN".as_ptr(),
                    None,
                    ptr::null_mut(),
                    ptr::null_mut(),
                );
            }
            let mut failed = None;
            for (line, rec) in records {
                if rec.len() == 1 && rec[0].is_empty() {
                    continue;
                }
                if rec.len() < ncols {
                    eprintln!(
                        "{file}:{line}: expected {ncols} columns but found {} - filling the rest with NULL",
                        rec.len()
                    );
                } else if rec.len() > ncols {
                    eprintln!(
                        "{file}:{line}: expected {ncols} columns but found {} - extras ignored",
                        rec.len()
                    );
                }
                for i in 0..ncols {
                    match rec.get(i) {
                        Some(v) => {
                            let bytes = v.as_bytes();
                            ffi::sqlite3_bind_text(
                                stmt,
                                i as c_int + 1,
                                bytes.as_ptr().cast(),
                                bytes.len() as c_int,
                                ffi::SQLITE_TRANSIENT(),
                            );
                        }
                        None => {
                            ffi::sqlite3_bind_null(stmt, i as c_int + 1);
                        }
                    }
                }
                let rc = ffi::sqlite3_step(stmt);
                ffi::sqlite3_reset(stmt);
                if rc != ffi::SQLITE_DONE {
                    failed = Some(format!("{file}:{line}: INSERT failed: {}", errmsg(self.db)));
                    break;
                }
            }
            ffi::sqlite3_finalize(stmt);
            if in_tx {
                let end = if failed.is_some() {
                    c"ROLLBACK"
                } else {
                    c"COMMIT"
                };
                if ffi::sqlite3_exec(
                    self.db,
                    end.as_ptr(),
                    None,
                    ptr::null_mut(),
                    ptr::null_mut(),
                ) != ffi::SQLITE_OK
                    && failed.is_none()
                {
                    failed = Some(format!("Error: {}", errmsg(self.db)));
                }
            }
            if let Some(msg) = failed {
                eprintln!("{msg}");
                return Err(Stop::Error);
            }
        }
        Ok(())
    }

    /// `.dump`: the schema and rows as SQL that rebuilds them.
    fn dump(&mut self, pattern: Option<&str>) -> Result<(), Stop> {
        let objects = match self.query_strings(
            "SELECT name, type, sql FROM sqlite_schema WHERE sql IS NOT NULL \
             AND name NOT LIKE 'sqlite_%' AND tbl_name LIKE ?1 \
             ORDER BY type='table' DESC, rowid",
            &[pattern.unwrap_or("%")],
        ) {
            Ok(r) => r,
            Err(msg) => {
                eprintln!("Error: {msg}");
                return Err(Stop::Error);
            }
        };
        let mut text = String::from("PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n");
        let mut later = String::new();
        for o in &objects {
            if o[1] != "table" {
                later.push_str(&format!("{};\n", o[2]));
                continue;
            }
            text.push_str(&format!("{};\n", o[2]));
            let q = format!(
                "SELECT 'INSERT INTO ' || {} || ' VALUES(' || {} || ');' FROM \"{}\"",
                sql_literal(&quote_ident(&o[0])),
                self.quoted_columns(&o[0]),
                o[0].replace('"', "\"\"")
            );
            match self.query_strings(&q, &[]) {
                Ok(rows) => {
                    for r in rows {
                        text.push_str(&r[0]);
                        text.push('\n');
                    }
                }
                Err(msg) => {
                    eprintln!("Error: {msg}");
                    return Err(Stop::Error);
                }
            }
        }
        text.push_str(&later);
        text.push_str("COMMIT;\n");
        output::out(text.as_bytes());
        Ok(())
    }

    fn quoted_columns(&self, table: &str) -> String {
        let cols = self
            .query_strings("SELECT name FROM pragma_table_info(?1)", &[table])
            .unwrap_or_default();
        let parts: Vec<String> = cols
            .into_iter()
            .map(|c| format!("quote(\"{}\")", c[0].replace('"', "\"\"")))
            .collect();
        if parts.is_empty() {
            "''".into()
        } else {
            parts.join(" || ',' || ")
        }
    }
}

fn sql_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A name as sqlite3 writes it in schema comments: bare when it is a plain identifier.
fn quote_ident(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    // SAFETY: sqlite3_keyword_check reads `len` bytes of `name`.
    let keyword =
        unsafe { ffi::sqlite3_keyword_check(name.as_ptr().cast(), name.len() as c_int) != 0 };
    if plain && !keyword {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// Whether a line holds nothing but blanks and SQL comments (sqlite3 skips such lines between
/// statements rather than starting a statement with them).
fn only_comments(line: &str) -> bool {
    let mut rest = line.trim_start();
    loop {
        if rest.is_empty() {
            return true;
        }
        if rest.starts_with("--") {
            return true;
        }
        if let Some(body) = rest.strip_prefix("/*") {
            match body.find("*/") {
                Some(end) => rest = body[end + 2..].trim_start(),
                None => return false,
            }
            continue;
        }
        return false;
    }
}

/// The statement around SQLite's error offset, with a caret under it.
fn error_context(sql: &str, offset: usize) -> String {
    let mut chars: Vec<char> = sql.chars().collect();
    let mut off = sql[..offset.min(sql.len())].chars().count();
    if off > 50 {
        chars.drain(..off - 50);
        off = 50;
    }
    chars.truncate(78);
    let code: String = chars
        .iter()
        .map(|c| if c.is_whitespace() { ' ' } else { *c })
        .collect();
    if off < 25 {
        format!("\n  {code}\n  {}^--- error here", " ".repeat(off))
    } else {
        format!("\n  {code}\n  {}error here ---^", " ".repeat(off - 14))
    }
}

/// Records of delimited text with CSV quoting, each with its first line number.
fn parse_delimited(text: &str, sep: char) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1;
    while chars.peek().is_some() {
        let start = line;
        let mut rec = Vec::new();
        let mut field = String::new();
        let mut quoted = false;
        loop {
            let Some(c) = chars.next() else {
                rec.push(std::mem::take(&mut field));
                break;
            };
            if quoted {
                if c == '"' {
                    if chars.peek() == Some(&'"') {
                        chars.next();
                        field.push('"');
                    } else {
                        quoted = false;
                    }
                } else {
                    if c == '\n' {
                        line += 1;
                    }
                    field.push(c);
                }
            } else if c == '"' && field.is_empty() {
                quoted = true;
            } else if c == sep {
                rec.push(std::mem::take(&mut field));
            } else if c == '\n' {
                line += 1;
                if field.ends_with('\r') {
                    field.pop();
                }
                rec.push(std::mem::take(&mut field));
                break;
            } else {
                field.push(c);
            }
        }
        out.push((start, rec));
    }
    out
}

/// Splits a dot-command line into words; quotes group words.
fn split_dot(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut chars = line.trim().chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut w = String::new();
        if c == '"' || c == '\'' {
            chars.next();
            let mut closed = false;
            while let Some(d) = chars.next() {
                if d == c {
                    closed = true;
                    break;
                }
                if d == '\\' && c == '"' {
                    match chars.next() {
                        Some('t') => w.push('\t'),
                        Some('n') => w.push('\n'),
                        Some(x) => w.push(x),
                        None => {}
                    }
                    continue;
                }
                w.push(d);
            }
            if !closed {
                return None;
            }
        } else {
            while let Some(&d) = chars.peek() {
                if d.is_whitespace() {
                    break;
                }
                w.push(d);
                chars.next();
            }
        }
        words.push(w);
    }
    Some(words)
}

/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn cstr_lossy(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: per the contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// # Safety
/// `stmt` has a current row and `i` is one of its columns.
unsafe fn value(stmt: *mut ffi::sqlite3_stmt, i: c_int) -> output::Value {
    // SAFETY: per the contract; the text/blob pointers are copied before the next step.
    unsafe {
        match ffi::sqlite3_column_type(stmt, i) {
            ffi::SQLITE_NULL => output::Value::Null,
            ffi::SQLITE_INTEGER => {
                output::Value::Int(cstr_lossy(ffi::sqlite3_column_text(stmt, i).cast()))
            }
            ffi::SQLITE_FLOAT => output::Value::Real(
                ffi::sqlite3_column_double(stmt, i),
                cstr_lossy(ffi::sqlite3_column_text(stmt, i).cast()),
            ),
            ffi::SQLITE_BLOB => {
                let p = ffi::sqlite3_column_blob(stmt, i).cast::<u8>();
                let n = ffi::sqlite3_column_bytes(stmt, i) as usize;
                let bytes = if p.is_null() {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(p, n).to_vec()
                };
                output::Value::Blob(bytes)
            }
            _ => {
                let p = ffi::sqlite3_column_text(stmt, i);
                let n = ffi::sqlite3_column_bytes(stmt, i) as usize;
                let bytes = if p.is_null() {
                    &[][..]
                } else {
                    std::slice::from_raw_parts(p, n)
                };
                output::Value::Text(String::from_utf8_lossy(bytes).into_owned())
            }
        }
    }
}

fn errno_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}
