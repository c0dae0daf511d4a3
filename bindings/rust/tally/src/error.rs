//! Every error of the C library as a Rust error.
//!
//! The C functions return 0 or a negative errno value; each errno has one
//! meaning per call (tally/memcg.h, "Error codes"), given here by the
//! variant.  A value outside the set (a system call's errno passed
//! through) is `Error::Os`.

use std::fmt;

/// An error of a tally call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// `EINVAL`: an argument the library refuses (a bad name, a size or
    /// limit out of range, a destroyed group, unknown flags).
    InvalidArgument,
    /// `ENOENT`: a path that names no group, a stat name not in the schema.
    NotFound,
    /// `EEXIST`: a group of that name exists already, or two exported
    /// families would share a metric name.
    AlreadyExists,
    /// `EBUSY`: a group that still has children, or a max below the
    /// usage that reclaim could not bring down.
    Busy,
    /// `ENOMEM` from a charge: refused, a limit would be exceeded
    /// (nothing was charged).
    LimitExceeded,
    /// `ENOMEM` from anything else: an allocation failed.
    OutOfMemory,
    /// `EAGAIN`: a non-blocking charge that would have had to wait.
    WouldBlock,
    /// `E2BIG`: a no-fail charge larger than some max of the chain.
    TooBig,
    /// `ERANGE`: an uncharge of more than was charged.
    Underflow,
    /// `EDEADLK`: a call that would wait for ever for a callback.
    Deadlock,
    /// `ENODEV`: the CPUs of the machine could not be read.
    NoDevice,
    /// Another errno, passed through from a system call.
    Os(i32),
}

/// The result of a tally call.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The error of a C return value (negative errno); `charge` tells a
    /// refused charge's `ENOMEM` from a failed allocation's.
    pub(crate) fn from_errno(neg: i64, charge: bool) -> Error {
        match -neg as i32 {
            libc_errno::EINVAL => Error::InvalidArgument,
            libc_errno::ENOENT => Error::NotFound,
            libc_errno::EEXIST => Error::AlreadyExists,
            libc_errno::EBUSY => Error::Busy,
            libc_errno::ENOMEM if charge => Error::LimitExceeded,
            libc_errno::ENOMEM => Error::OutOfMemory,
            libc_errno::EAGAIN => Error::WouldBlock,
            libc_errno::E2BIG => Error::TooBig,
            libc_errno::ERANGE => Error::Underflow,
            libc_errno::EDEADLK => Error::Deadlock,
            libc_errno::ENODEV => Error::NoDevice,
            e => Error::Os(e),
        }
    }

    /// The errno value this error stands for.
    pub fn errno(&self) -> i32 {
        match self {
            Error::InvalidArgument => libc_errno::EINVAL,
            Error::NotFound => libc_errno::ENOENT,
            Error::AlreadyExists => libc_errno::EEXIST,
            Error::Busy => libc_errno::EBUSY,
            Error::LimitExceeded | Error::OutOfMemory => libc_errno::ENOMEM,
            Error::WouldBlock => libc_errno::EAGAIN,
            Error::TooBig => libc_errno::E2BIG,
            Error::Underflow => libc_errno::ERANGE,
            Error::Deadlock => libc_errno::EDEADLK,
            Error::NoDevice => libc_errno::ENODEV,
            Error::Os(e) => *e,
        }
    }
}

/// `0` or a negative errno to a `Result`.
pub(crate) fn check(rc: i32) -> Result<i32> {
    if rc < 0 {
        Err(Error::from_errno(rc.into(), false))
    } else {
        Ok(rc)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self {
            Error::InvalidArgument => "invalid argument",
            Error::NotFound => "no such group or stat",
            Error::AlreadyExists => "the name exists already",
            Error::Busy => "busy: the group has children, or its usage is above the new max",
            Error::LimitExceeded => "charge refused: a limit would be exceeded",
            Error::OutOfMemory => "out of memory",
            Error::WouldBlock => "the charge would have to wait",
            Error::TooBig => "the charge is larger than a max of the chain",
            Error::Underflow => "uncharge of more than was charged",
            Error::Deadlock => "the call would wait for ever for a callback",
            Error::NoDevice => "the machine's CPUs could not be read",
            Error::Os(_) => "system error",
        };
        write!(f, "{what} (errno {})", self.errno())
    }
}

impl std::error::Error for Error {}

/// The Linux errno values the library returns (asm-generic/errno-base.h
/// and errno.h: the same on every Linux architecture tally supports).
mod libc_errno {
    pub const ENOENT: i32 = 2;
    pub const E2BIG: i32 = 7;
    pub const EAGAIN: i32 = 11;
    pub const ENOMEM: i32 = 12;
    pub const EBUSY: i32 = 16;
    pub const EEXIST: i32 = 17;
    pub const ENODEV: i32 = 19;
    pub const EINVAL: i32 = 22;
    pub const ERANGE: i32 = 34;
    pub const EDEADLK: i32 = 35;
}
