//! Python's own text forms of template values, so a template renders here as it does under
//! Python's jinja2 in Hugging Face's `apply_chat_template`:
//! - [`write_str`]: what `{{ value }}` prints (Python's `str()`: `True`, `None`, `{'a': 1}`);
//! - [`dumps`]: transformers' `tojson` filter, which is `json.dumps(x, ensure_ascii=False,
//!   indent=None, separators=None, sort_keys=False)` (not jinja2's HTML-escaping filter);
//! - [`strftime`]: `datetime.strftime` for the directives chat templates use.

use minijinja::value::{Value, ValueKind};
use std::fmt::Write as _;

/// A template value holding `value` (objects keep their key order).
pub fn from_json<T: serde::Serialize>(value: &T) -> Value {
    Value::from(minijinja::value::Serde(value))
}

/// Python's `repr()` of a float (`1.0`, `1e-05`, `1.5e+16`, `inf`, `nan`).
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    // Rust's `{:e}` gives the shortest digits that round-trip, as Python's repr does.
    let sci = format!("{x:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    if (-4..16).contains(&exponent) {
        let point = exponent + 1;
        let (int, frac) = if point <= 0 {
            (
                "0".to_owned(),
                format!("{}{digits}", "0".repeat(point.unsigned_abs() as usize)),
            )
        } else {
            let point = point as usize;
            if digits.len() > point {
                (digits[..point].to_owned(), digits[point..].to_owned())
            } else {
                (
                    format!("{digits}{}", "0".repeat(point - digits.len())),
                    String::new(),
                )
            }
        };
        let frac = if frac.is_empty() {
            "0".to_owned()
        } else {
            frac
        };
        format!("{sign}{int}.{frac}")
    } else {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        let dot = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exponent < 0 { '-' } else { '+' };
        format!("{sign}{first}{dot}e{esign}{:02}", exponent.unsigned_abs())
    }
}

/// Python's `repr()` of a string: single quotes unless the text holds `'` and no `"`.
fn str_repr(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..0xa0).contains(&(c as u32)) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// Python's `repr()` of `value` (the form of an item inside a printed list or dict).
fn repr(value: &Value, out: &mut String) {
    match value.kind() {
        ValueKind::String => str_repr(value.as_str().unwrap_or_default(), out),
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            for (i, item) in value.try_iter().into_iter().flatten().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                repr(&item, out);
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            for (i, key) in value.try_iter().into_iter().flatten().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                repr(&key, out);
                out.push_str(": ");
                repr(&value.get_item(&key).unwrap_or_default(), out);
            }
            out.push('}');
        }
        _ => scalar_str(value, out),
    }
}

/// Python's `str()` of a non-container value.
fn scalar_str(value: &Value, out: &mut String) {
    match value.kind() {
        ValueKind::Undefined => {}
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number => match f64::try_from(value.clone()) {
            Ok(x) if !value.is_integer() => out.push_str(&float_repr(x)),
            _ => {
                let _ = write!(out, "{value}");
            }
        },
        _ => {
            let _ = write!(out, "{value}");
        }
    }
}

/// What `{{ value }}` prints under jinja2: Python's `str(value)`.
pub fn write_str(value: &Value, out: &mut String) {
    match value.kind() {
        ValueKind::String => out.push_str(value.as_str().unwrap_or_default()),
        ValueKind::Seq | ValueKind::Map | ValueKind::Iterable => repr(value, out),
        _ => scalar_str(value, out),
    }
}

/// `json.dumps` options as transformers' `tojson` filter takes them.
#[derive(Clone, Debug, Default)]
pub struct DumpOptions {
    /// `ensure_ascii`: escape every non-ASCII character as `\uXXXX`.
    pub ensure_ascii: bool,
    /// `indent`: `None` for one line, else the text of one level.
    pub indent: Option<String>,
    /// `separators`: (item, key) separators; the default depends on `indent`.
    pub separators: Option<(String, String)>,
    /// `sort_keys`.
    pub sort_keys: bool,
}

fn json_string(s: &str, ensure_ascii: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ensure_ascii && !c.is_ascii() => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `json.dumps(value, ...)`.
///
/// # Errors
/// A message as Python's `TypeError` would give for a value JSON cannot hold (undefined, a
/// callable).
pub fn dumps(value: &Value, options: &DumpOptions) -> Result<String, String> {
    let (item_sep, key_sep) = options.separators.clone().unwrap_or_else(|| {
        if options.indent.is_some() {
            (",".into(), ": ".into())
        } else {
            (", ".into(), ": ".into())
        }
    });
    let mut out = String::new();
    dump_into(value, options, &item_sep, &key_sep, 0, &mut out)?;
    Ok(out)
}

fn newline(options: &DumpOptions, depth: usize, out: &mut String) {
    if let Some(indent) = &options.indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(indent);
        }
    }
}

/// How deep `json.dumps` goes before giving up (Python's own recursion limit is about 1000).
const MAX_JSON_DEPTH: usize = 128;

fn dump_into(
    value: &Value,
    options: &DumpOptions,
    item_sep: &str,
    key_sep: &str,
    depth: usize,
    out: &mut String,
) -> Result<(), String> {
    if depth > MAX_JSON_DEPTH {
        return Err("tojson: the value nests too deeply".into());
    }
    match value.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => match f64::try_from(value.clone()) {
            Ok(x) if !value.is_integer() => out.push_str(&match float_repr(x).as_str() {
                "inf" => "Infinity".to_owned(),
                "-inf" => "-Infinity".to_owned(),
                "nan" => "NaN".to_owned(),
                other => other.to_owned(),
            }),
            _ => {
                let _ = write!(out, "{value}");
            }
        },
        ValueKind::String => json_string(
            value.as_str().unwrap_or_default(),
            options.ensure_ascii,
            out,
        ),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter().into_iter().flatten().collect();
            out.push('[');
            if !items.is_empty() {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(item_sep);
                    }
                    newline(options, depth + 1, out);
                    dump_into(item, options, item_sep, key_sep, depth + 1, out)?;
                }
                newline(options, depth, out);
            }
            out.push(']');
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = value.try_iter().into_iter().flatten().collect();
            if options.sort_keys {
                keys.sort();
            }
            out.push('{');
            if !keys.is_empty() {
                for (i, key) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push_str(item_sep);
                    }
                    newline(options, depth + 1, out);
                    let key_text = match key.kind() {
                        ValueKind::String => key.as_str().unwrap_or_default().to_owned(),
                        ValueKind::None => "null".into(),
                        ValueKind::Bool => if key.is_true() { "true" } else { "false" }.into(),
                        ValueKind::Number => {
                            let mut s = String::new();
                            scalar_str(key, &mut s);
                            s
                        }
                        _ => {
                            return Err(format!(
                                "tojson: keys must be str, int, float, bool or None, not {}",
                                key.kind()
                            ));
                        }
                    };
                    json_string(&key_text, options.ensure_ascii, out);
                    out.push_str(key_sep);
                    let item = value.get_item(key).unwrap_or_default();
                    dump_into(&item, options, item_sep, key_sep, depth + 1, out)?;
                }
                newline(options, depth, out);
            }
            out.push('}');
        }
        other => {
            return Err(format!(
                "tojson: Object of type {other} is not JSON serializable"
            ));
        }
    }
    Ok(())
}

/// A civil date and time (UTC) from milliseconds since the Unix epoch.
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    weekday: u32,
    yday: u32,
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn civil(ms: f64) -> Civil {
    let secs = (ms / 1000.0).floor() as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400) as u32;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    const BEFORE: [u32; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let yday = BEFORE[month as usize - 1] + day + u32::from(leap && month > 2);
    Civil {
        year,
        month,
        day,
        hour: rem / 3600,
        minute: rem / 60 % 60,
        second: rem % 60,
        // 1970-01-01 was a Thursday; Monday = 0 as Python's weekday().
        weekday: (days + 3).rem_euclid(7) as u32,
        yday,
    }
}

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
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// `datetime.fromtimestamp(ms / 1000, UTC).strftime(format)` for the C directives `%a %A %b %B
/// %d %e %H %I %j %m %M %p %S %y %Y %%` (what chat templates use); any other directive is
/// kept as written.
pub fn strftime(format: &str, ms: f64) -> String {
    let t = civil(ms);
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(d) = chars.next() else {
            out.push('%');
            break;
        };
        let month = MONTHS[t.month as usize - 1];
        let weekday = WEEKDAYS[t.weekday as usize];
        let _ = match d {
            'a' => write!(out, "{}", &weekday[..3]),
            'A' => write!(out, "{weekday}"),
            'b' | 'h' => write!(out, "{}", &month[..3]),
            'B' => write!(out, "{month}"),
            'd' => write!(out, "{:02}", t.day),
            'e' => write!(out, "{:2}", t.day),
            'H' => write!(out, "{:02}", t.hour),
            'I' => write!(out, "{:02}", (t.hour + 11) % 12 + 1),
            'j' => write!(out, "{:03}", t.yday),
            'm' => write!(out, "{:02}", t.month),
            'M' => write!(out, "{:02}", t.minute),
            'p' => write!(out, "{}", if t.hour < 12 { "AM" } else { "PM" }),
            'S' => write!(out, "{:02}", t.second),
            'y' => write!(out, "{:02}", t.year.rem_euclid(100)),
            'Y' => write!(out, "{}", t.year),
            '%' => write!(out, "%"),
            other => write!(out, "%{other}"),
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_python_repr() {
        for (x, want) in [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1.5e16, "1.5e+16"),
            (1e16, "1e+16"),
            (123_456_789.125, "123456789.125"),
            (-2.5, "-2.5"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e15, "1000000000000000.0"),
        ] {
            assert_eq!(float_repr(x), want, "{x}");
        }
    }

    #[test]
    fn values_print_as_python_str_and_json_dumps() {
        let v = from_json(&serde_json::json!({"a": [1, 2.5, true, null], "b": "it's"}));
        let mut s = String::new();
        write_str(&v, &mut s);
        assert_eq!(s, r#"{'a': [1, 2.5, True, None], 'b': "it's"}"#);
        let json = dumps(&v, &DumpOptions::default()).unwrap();
        assert_eq!(json, r#"{"a": [1, 2.5, true, null], "b": "it's"}"#);
        let indented = dumps(
            &v,
            &DumpOptions {
                indent: Some("  ".into()),
                ..DumpOptions::default()
            },
        )
        .unwrap();
        assert_eq!(
            indented,
            "{\n  \"a\": [\n    1,\n    2.5,\n    true,\n    null\n  ],\n  \"b\": \"it's\"\n}"
        );
        let ascii = DumpOptions {
            ensure_ascii: true,
            ..DumpOptions::default()
        };
        assert_eq!(
            dumps(&Value::from("é😀\u{1}"), &ascii).unwrap(),
            r#""\u00e9\ud83d\ude00\u0001""#
        );
    }

    #[test]
    fn dates_format_as_strftime() {
        // 2024-07-26 23:05:09 UTC, a Friday, day 208 of a leap year.
        let ms = 1_722_035_109_000.0;
        assert_eq!(
            strftime("%d %b %Y %H:%M:%S %A %j %y %B %a %m %I%p %%", ms),
            "26 Jul 2024 23:05:09 Friday 208 24 July Fri 07 11PM %"
        );
        assert_eq!(strftime("%Y-%m-%d", 0.0), "1970-01-01");
        assert_eq!(
            strftime("%Y-%m-%d %A", 951_782_400_000.0),
            "2000-02-29 Tuesday"
        );
    }
}
