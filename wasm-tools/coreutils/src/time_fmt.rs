//! The strftime subset `ls` needs for its dates (GNU's default and ISO styles and
//! `--time-style=+FORMAT`). The sandbox's time zone is UTC and its locale C.UTF-8, so names
//! are English and `%z` is `+0000`.

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

/// `secs` (and `nanos`) since the epoch, formatted by `fmt`; unknown conversions are kept as
/// written, as GNU date does.
pub fn format(secs: i64, nanos: u32, fmt: &str) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, mo, d) = guest_rt::civil_from_days(days);
    let (h, mi, s) = (rem / 3600, rem / 60 % 60, rem % 60);
    // 1970-01-01 was a Thursday.
    let wday = (days + 4).rem_euclid(7) as usize;
    let mut out = String::new();
    let mut it = fmt.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('Y') => out.push_str(&format!("{y:04}")),
            Some('y') => out.push_str(&format!("{:02}", y.rem_euclid(100))),
            Some('m') => out.push_str(&format!("{mo:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('e') => out.push_str(&format!("{d:>2}")),
            Some('H') => out.push_str(&format!("{h:02}")),
            Some('M') => out.push_str(&format!("{mi:02}")),
            Some('S') => out.push_str(&format!("{s:02}")),
            Some('N') => out.push_str(&format!("{nanos:09}")),
            Some('z') => out.push_str("+0000"),
            Some('Z') => out.push_str("UTC"),
            Some('b') | Some('h') => out.push_str(MONTHS[(mo - 1) as usize]),
            Some('a') => out.push_str(DAYS[wday]),
            Some('F') => out.push_str(&format!("{y:04}-{mo:02}-{d:02}")),
            Some('T') => out.push_str(&format!("{h:02}:{mi:02}:{s:02}")),
            Some('R') => out.push_str(&format!("{h:02}:{mi:02}")),
            Some('s') => out.push_str(&secs.to_string()),
            Some('%') => out.push('%'),
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::format;

    #[test]
    fn gnu_ls_styles() {
        // 2024-02-29 13:05:09 UTC, a Thursday.
        let t = 1_709_211_909;
        assert_eq!(format(t, 0, "%b %e %H:%M"), "Feb 29 13:05");
        assert_eq!(format(t, 0, "%b %e  %Y"), "Feb 29  2024");
        assert_eq!(
            format(t, 5, "%Y-%m-%d %H:%M:%S.%N %z"),
            "2024-02-29 13:05:09.000000005 +0000"
        );
        assert_eq!(format(t, 0, "%a %F %T %%"), "Thu 2024-02-29 13:05:09 %");
        assert_eq!(format(0, 0, "%e|%q"), " 1|%q");
    }
}
