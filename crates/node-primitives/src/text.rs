//! Text cut to a size without splitting a character.

/// The longest prefix of `text` that is at most `max` bytes and ends on a character boundary.
/// Callers say what was cut their own way (`…`, `...`, a byte count).
pub fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_between_characters() {
        assert_eq!(cut("hello", 10), "hello");
        assert_eq!(cut("hello", 5), "hello");
        assert_eq!(cut("hello", 2), "he");
        assert_eq!(cut("hello", 0), "");
        // é is two bytes: a cut inside it goes before it
        assert_eq!(cut("aé", 2), "a");
        assert_eq!(cut("aé", 3), "aé");
        assert_eq!(cut("€€", 5), "€");
        assert_eq!(cut("", 0), "");
    }

    proptest::proptest! {
        #[test]
        fn a_cut_is_a_prefix_within_the_cap(text in ".{0,40}", max in 0usize..100) {
            let got = cut(&text, max);
            proptest::prop_assert!(text.starts_with(got));
            proptest::prop_assert!(got.len() <= max);
            // nothing more fits: the next character would pass the cap
            if let Some(next) = text[got.len()..].chars().next() {
                proptest::prop_assert!(got.len() + next.len_utf8() > max);
            }
        }
    }
}
