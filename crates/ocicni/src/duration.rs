//! The one duration syntax of every command line and configuration file in this workspace:
//! a number and a unit, `500ms`, `30s`, `2m`, `1h`, `1.5s`; a bare number is seconds.

use std::time::Duration;

/// Reads a duration such as `500ms`, `30s`, `2m`, `1h` or `1.5` (seconds).
///
/// ```
/// use std::time::Duration;
///
/// assert_eq!(ocicni::duration::parse("1.5s"), Ok(Duration::from_millis(1500)));
/// assert_eq!(ocicni::duration::parse("250ms"), Ok(Duration::from_millis(250)));
/// assert_eq!(ocicni::duration::parse("2"), Ok(Duration::from_secs(2)));
/// assert!(ocicni::duration::parse("1e300").is_err());
/// ```
///
/// # Errors
///
/// A message (without the input, which callers name with the flag or key) for anything that is
/// not a non-negative decimal number with one of the units, and for a duration too long to hold.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let expected = || "expected a number with ms, s, m or h (a bare number is seconds)".to_owned();
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return Err(expected());
    }
    let value: f64 = number.parse().map_err(|_| expected())?;
    let per_unit = match unit.trim() {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(expected()),
    };
    Duration::try_from_secs_f64(value * per_unit).map_err(|_| "too long".to_owned())
}

/// Writes a duration the way [`parse`] reads it: whole seconds as `30s`, anything else in
/// milliseconds.
pub fn format(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else {
        format!("{millis}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_errors() {
        for (text, want) in [
            ("0", Duration::ZERO),
            ("90", Duration::from_secs(90)),
            ("60s", Duration::from_secs(60)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("0.5", Duration::from_millis(500)),
            (" 750ms ", Duration::from_millis(750)),
        ] {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
        for text in [
            "", "s", "-1", "1.2.3", ".5", "5.", "NaN", "inf", "1e300", "3 days", "1x",
        ] {
            assert!(parse(text).is_err(), "{text}");
        }
        assert_eq!(parse("99999999999999999999h"), Err("too long".to_owned()));
    }

    #[test]
    fn formatted_durations_read_back() {
        for d in [
            Duration::from_secs(60),
            Duration::from_millis(1500),
            Duration::ZERO,
        ] {
            assert_eq!(parse(&format(d)), Ok(d));
        }
    }
}
