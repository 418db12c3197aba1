//! strftime/mktime in UTC (the sandbox has no time zone database).

const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

struct Tm {
    year: i64,
    mon: i64,
    mday: i64,
    hour: i64,
    min: i64,
    sec: i64,
    wday: i64,
    yday: i64,
}

fn breakdown(t: i64) -> Tm {
    let days = t.div_euclid(86400);
    let secs = t.rem_euclid(86400);
    let (year, mon, mday) = guest_rt::civil_from_days(days);
    Tm {
        year,
        mon: i64::from(mon),
        mday: i64::from(mday),
        hour: secs / 3600,
        min: secs / 60 % 60,
        sec: secs % 60,
        wday: (days + 4).rem_euclid(7),
        yday: days - guest_rt::days_from_civil(year, 1, 1),
    }
}

pub fn strftime(fmt: &str, t: i64) -> String {
    let tm = breakdown(t);
    let mut out = String::new();
    let mut it = fmt.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(f) = it.next() else {
            out.push('%');
            break;
        };
        let h12 = if tm.hour % 12 == 0 { 12 } else { tm.hour % 12 };
        let s = match f {
            'a' => DAYS[tm.wday as usize][..3].to_string(),
            'A' => DAYS[tm.wday as usize].to_string(),
            'b' | 'h' => MONTHS[tm.mon as usize - 1][..3].to_string(),
            'B' => MONTHS[tm.mon as usize - 1].to_string(),
            'c' => strftime("%a %b %e %H:%M:%S %Y", t),
            'C' => format!("{:02}", tm.year / 100),
            'd' => format!("{:02}", tm.mday),
            'D' => strftime("%m/%d/%y", t),
            'e' => format!("{:2}", tm.mday),
            'F' => strftime("%Y-%m-%d", t),
            'H' => format!("{:02}", tm.hour),
            'I' => format!("{h12:02}"),
            'j' => format!("{:03}", tm.yday + 1),
            'k' => format!("{:2}", tm.hour),
            'l' => format!("{h12:2}"),
            'm' => format!("{:02}", tm.mon),
            'M' => format!("{:02}", tm.min),
            'n' => "\n".into(),
            'p' => if tm.hour < 12 { "AM" } else { "PM" }.into(),
            'r' => strftime("%I:%M:%S %p", t),
            'R' => strftime("%H:%M", t),
            's' => t.to_string(),
            'S' => format!("{:02}", tm.sec),
            't' => "\t".into(),
            'T' => strftime("%H:%M:%S", t),
            'u' => (if tm.wday == 0 { 7 } else { tm.wday }).to_string(),
            'w' => tm.wday.to_string(),
            'U' => format!("{:02}", (tm.yday + 7 - tm.wday) / 7),
            'W' => format!("{:02}", (tm.yday + 7 - (tm.wday + 6) % 7) / 7),
            'x' => strftime("%m/%d/%y", t),
            'X' => strftime("%H:%M:%S", t),
            'y' => format!("{:02}", tm.year.rem_euclid(100)),
            'Y' => tm.year.to_string(),
            'z' => "+0000".into(),
            'Z' => "UTC".into(),
            '%' => "%".into(),
            other => format!("%{other}"),
        };
        out.push_str(&s);
    }
    out
}

/// "YYYY MM DD HH MM SS [DST]" as UTC seconds; -1 when malformed.
pub fn mktime(s: &str) -> f64 {
    let parts: Vec<i64> = s
        .split_whitespace()
        .map_while(|p| p.parse::<i64>().ok())
        .collect();
    if parts.len() < 6 {
        return -1.0;
    }
    let (y, mo, d, h, mi, se) = (parts[0], parts[1], parts[2], parts[3], parts[4], parts[5]);
    // Months outside 1..12 carry into the year, as mktime(3) normalizes.
    let y = y + (mo - 1).div_euclid(12);
    let mo = (mo - 1).rem_euclid(12) + 1;
    let days = guest_rt::days_from_civil(y, mo as u32, 1) + d - 1;
    (days * 86400 + h * 3600 + mi * 60 + se) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        assert_eq!(strftime("%Y-%m-%d %H:%M:%S", 0), "1970-01-01 00:00:00");
        assert_eq!(mktime("2024 02 29 12 00 00"), 1709208000.0);
        assert_eq!(
            strftime("%F %T %a %j", 1709208000),
            "2024-02-29 12:00:00 Thu 060"
        );
    }
}
