//! The one error type of the engine. Every invalid parameter or input is an
//! [`Error`], never a panic; the Python bindings map each variant to one exception.

use thiserror::Error as ThisError;

/// Result alias used across the crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong in the engine.
#[derive(Debug, Clone, PartialEq, Eq, ThisError)]
pub enum Error {
    /// A parameter is out of its valid range (Flink: `IllegalArgumentException`).
    #[error("invalid parameter `{name}`: {message}")]
    InvalidParameter {
        /// The parameter's name as the user wrote it.
        name: &'static str,
        /// What is wrong and what would be valid.
        message: String,
    },
    /// A channel index outside `0..num_channels` (Flink: `IndexOutOfBoundsException`).
    #[error("channel {channel} is out of range: the valve has {num_channels} channel(s)")]
    ChannelOutOfRange {
        /// The offending channel index.
        channel: i64,
        /// How many channels the valve has.
        num_channels: usize,
    },
    /// An operation that is not allowed in the object's current state
    /// (Flink: `IllegalStateException`), e.g. registering an output id twice.
    #[error("{0}")]
    IllegalState(String),
    /// Input data that cannot be processed (wrong length, wrong order, bad value).
    #[error("invalid input `{column}`: {message}")]
    InvalidInput {
        /// The column or argument holding the bad data.
        column: String,
        /// What is wrong.
        message: String,
    },
    /// A snapshot that cannot be restored (corrupt, truncated, other version or kind).
    #[error("cannot restore snapshot: {0}")]
    Snapshot(String),
}

impl Error {
    /// Shorthand for [`Error::InvalidParameter`].
    pub fn param(name: &'static str, message: impl Into<String>) -> Self {
        Self::InvalidParameter {
            name,
            message: message.into(),
        }
    }

    /// Shorthand for [`Error::InvalidInput`].
    pub fn input(column: impl Into<String>, message: impl Into<String>) -> Self {
        Self::InvalidInput {
            column: column.into(),
            message: message.into(),
        }
    }
}
