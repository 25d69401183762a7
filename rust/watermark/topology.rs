//! Which source subtask reads which channel: Flink's Kafka source assigns partitions
//! to its readers (`KafkaSourceEnumerator.getSplitOwner`), and each subtask combines
//! its partitions' watermarks with a [`super::Multiplexer`] before the
//! [`super::Valve`] combines the subtasks ([`super::TimelineBuilder::with_subtasks`]).

use crate::error::{Error, Result};

/// Java's `String.hashCode()`: `s[0]*31^(n-1) + ... + s[n-1]` over the UTF-16 code
/// units, in wrapping `int` arithmetic.
///
/// # Examples
/// ```
/// use floodmark::watermark::java_string_hash;
/// assert_eq!(java_string_hash(""), 0);
/// assert_eq!(java_string_hash("a"), 97);
/// assert_eq!(java_string_hash("ab"), 3105);
/// ```
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)))
}

/// The reader the partitions of `topic` start at:
/// `((topic.hashCode() * 31) & 0x7FFFFFFF) % num_readers`, or 0 without a topic.
///
/// # Errors
/// [`Error::InvalidParameter`] naming `source_parallelism` unless `num_readers >= 1`.
pub fn kafka_start_index(topic: Option<&str>, num_readers: usize) -> Result<usize> {
    check_readers(num_readers)?;
    Ok(topic.map_or(0, |t| {
        let h = java_string_hash(t).wrapping_mul(31) & 0x7FFF_FFFF;
        // `h` is non-negative: the cast and the modulo are exact.
        (h as u64 % num_readers as u64) as usize
    }))
}

/// The source subtask that reads `partition` of `topic`, as Flink's Kafka source
/// enumerator assigns it: `(start_index + partition) % num_readers`
/// ([`kafka_start_index`]).
///
/// # Errors
/// [`Error::InvalidParameter`] naming `source_parallelism` unless `num_readers >= 1`;
/// [`Error::InvalidInput`] naming `channel` for a negative partition.
pub fn kafka_split_owner(topic: Option<&str>, partition: i64, num_readers: usize) -> Result<usize> {
    let start = kafka_start_index(topic, num_readers)?;
    let p = u64::try_from(partition).map_err(|_| {
        Error::input(
            "channel",
            format!("a Kafka partition number is >= 0, got {partition}"),
        )
    })?;
    let n = num_readers as u64;
    Ok(((start as u64 + p % n) % n) as usize)
}

fn check_readers(num_readers: usize) -> Result<()> {
    if num_readers == 0 {
        return Err(Error::param("source_parallelism", "must be >= 1, got 0"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_codes() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("ab"), 3105);
        // "events": computed by the formula in i64, then wrapped to i32.
        let want = "events"
            .bytes()
            .fold(0i64, |h, b| (h * 31 + i64::from(b)) & 0xFFFF_FFFF);
        assert_eq!(java_string_hash("events"), want as u32 as i32);
        // Known Java values.
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        // Outside the BMP: two UTF-16 units.
        assert_eq!(java_string_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn owners() {
        assert_eq!(kafka_split_owner(None, 5, 4).unwrap(), 1);
        let start = kafka_start_index(Some("events"), 4).unwrap();
        for p in 0..16 {
            assert_eq!(
                kafka_split_owner(Some("events"), p, 4).unwrap(),
                (start + p as usize) % 4
            );
        }
        assert!(kafka_split_owner(None, -1, 4).is_err());
        assert!(matches!(
            kafka_split_owner(None, 0, 0),
            Err(Error::InvalidParameter {
                name: "source_parallelism",
                ..
            })
        ));
    }
}
