//! `rg --help`, `rg -h` and `rg --version` texts (written for this build: they list what it
//! implements).

pub const VERSION: &str = "rg (wasmsand) 0.1.0, ripgrep-compatible \
(grep-searcher 0.1, grep-regex 0.1, ignore 0.4)\n";

pub const SHORT: &str = "\
rg (wasmsand): recursively search the current directory for lines matching a regex.

USAGE:
    rg [OPTIONS] PATTERN [PATH ...]
    rg [OPTIONS] -e PATTERN ... [PATH ...]
    rg [OPTIONS] -f PATTERNFILE ... [PATH ...]
    rg [OPTIONS] --files [PATH ...]
    rg [OPTIONS] --type-list
    command | rg [OPTIONS] PATTERN

Common options (rg --help lists them all):
    -i, -S, -s          ignore case / smart case / case sensitive
    -F, -w, -x, -v      fixed strings / whole words / whole lines / invert
    -e PAT, -f FILE     patterns (several allowed)
    -n, -N              line numbers on / off
    -o, -c, -l          only the match / counts / file names
    -A N, -B N, -C N    context lines after / before / around
    -g GLOB, -t TYPE    include or (!GLOB, -T TYPE) exclude files
    --hidden, -u        hidden files / fewer filters (-uu, -uuu)
    -m N, -q            at most N matching lines per file / quiet
    --files             list the files that would be searched
";

pub const LONG: &str = "\
rg (wasmsand): recursively search for lines matching a regex, with ripgrep's command line.

USAGE:
    rg [OPTIONS] PATTERN [PATH ...]
    rg [OPTIONS] -e PATTERN ... [PATH ...]
    rg [OPTIONS] -f PATTERNFILE ... [PATH ...]
    rg [OPTIONS] --files [PATH ...]
    rg [OPTIONS] --type-list
    command | rg [OPTIONS] PATTERN

Without a PATH, rg searches stdin when it has data and the current directory otherwise
(the sandbox never has a terminal; an empty stdin counts as none). A PATH of - is stdin.
Directories are walked in name order (as `rg --sort path` prints), skipping hidden files
and what .gitignore (inside a git repository, also from parent directories up to its root),
.ignore and .rgignore exclude. Files found by walking that contain a NUL byte are skipped;
named files that do print `binary file matches`. Exit status: 0 if a line matched, 1 if
none did, 2 on an error (unless -q found a match).

PATTERNS:
    -e, --regexp PATTERN      a pattern (repeatable; also for patterns starting with -)
    -f, --file FILE           patterns from FILE, one per line (- for stdin)
    -F, --fixed-strings       patterns are literal strings
    -i, --ignore-case         case-insensitive
    -S, --smart-case          case-insensitive unless a pattern has an uppercase letter
    -s, --case-sensitive      case-sensitive (the default)
    -w, --word-regexp         matches must be whole words
    -x, --line-regexp         matches must be whole lines
    -v, --invert-match        print the lines that do not match
    -U, --multiline           patterns may match across lines
        --multiline-dotall    with -U, . matches a newline too
        --crlf                treat CRLF as a line ending
        --no-unicode          ASCII-only classes and case folding
    -E, --encoding ENC        input encoding (auto, none, utf-8, utf-16le, latin1, ...)

OUTPUT:
    -n, --line-number         print line numbers
    -N, --no-line-number      no line numbers (the default off a terminal)
        --column              print the column of the first match (implies -n)
        --vimgrep             path:line:column:text for every match
    -b, --byte-offset         print the byte offset of each line
    -o, --only-matching       print only the matched parts, one per line
    -r, --replace TEXT        print matches replaced by TEXT ($1, $name groups)
    -A, --after-context N     N lines after each match
    -B, --before-context N    N lines before each match
    -C, --context N           N lines before and after (-A/-B win over it)
        --context-separator S separator between context groups (default --)
        --no-context-separator
        --passthru            print every line, matching or not
    -H, --with-filename       print the path on each line
    -I, --no-filename         never print paths
        --heading             group matches under each file's path
        --no-heading          path on each line (the default off a terminal)
    -0, --null                end paths with NUL
    -c, --count               number of matching lines per file
        --count-matches       number of matches per file
        --include-zero        with -c, also files with no match
    -l, --files-with-matches  only the paths of files that match
        --files-without-match only the paths of files that do not match
    -q, --quiet               no output; the status says whether something matched
    -m, --max-count N         at most N matching lines per file
    -M, --max-columns N       omit lines longer than N bytes
        --max-columns-preview with -M, show the start of long lines
        --trim                strip leading whitespace
        --field-match-separator S, --field-context-separator S
        --json                JSON Lines (begin, match, context, end, summary messages)
        --color WHEN          never, auto (= never here), always, ansi
        --colors SPEC         e.g. match:fg:blue (ripgrep's syntax)
    -p, --pretty              --color always --heading -n
        --stats               accepted; no statistics are printed

FILES:
    -g, --glob GLOB           search only files matching GLOB (!GLOB excludes); repeatable
        --iglob GLOB          the same, case-insensitive
        --glob-case-insensitive
    -t, --type TYPE           search only files of TYPE (see --type-list)
    -T, --type-not TYPE       skip files of TYPE
        --type-add NAME:GLOB  define a type; --type-clear NAME empties one
        --type-list           print the known types and their globs
        --files               print the files that would be searched
    -., --hidden              search hidden files and directories
    -L, --follow              follow symbolic links
    -d, --max-depth N         descend at most N directories
        --max-filesize SIZE   skip larger files (K, M, G suffixes)
        --no-ignore           ignore no .gitignore/.ignore/.rgignore rules
        --no-ignore-vcs       ignore .gitignore rules only
        --no-ignore-dot       ignore .ignore and .rgignore only
        --no-ignore-parent    no ignore files from parent directories
        --no-ignore-global    no core.excludesFile; --no-ignore-exclude: no .git/info/exclude
        --no-require-git      apply .gitignore outside git repositories too
        --ignore-file FILE    extra ignore rules; --no-ignore-files drops them
        --ignore-file-case-insensitive
        --one-file-system     do not cross file systems
    -u, --unrestricted        -u: --no-ignore, -uu: and --hidden, -uuu: and --binary
        --binary              search binary files found by walking too
    -a, --text                search binary files as text
        --sort path|none|modified|accessed|created, --sortr ...  (default: path)
        --sort-files          the same as --sort path
        --no-messages         do not print error messages

OTHER:
    -j, --threads N           accepted; one thread is used
    -h                        short help; --help this text; -V, --version
        --no-config, --mmap, --no-mmap, --line-buffered, --block-buffered  accepted

Not available here: -P/--pcre2 and --engine pcre2, -z/--search-zip, --pre;
--hyperlink-format is accepted and ignored.
";
