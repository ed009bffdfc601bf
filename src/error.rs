//! One error model for the whole runtime.
//!
//! The backend registry and the backends speak ExecuTorch's `Error` codes ([`ErrorCode`]); the
//! parameter providers speak IREE's status codes ([`StatusCode`]). Both numeric tables are copied
//! exactly from upstream so that a code seen in JavaScript, in a log or in a test means what it
//! means upstream. Every error also carries a human-readable message: a code alone rarely says
//! which offset, which key or which backend was wrong.

use std::borrow::Cow;
use std::fmt;

/// ExecuTorch's `runtime/core/error.h` codes, with their exact numeric values (JavaScript sees
/// them as the exported `ErrorCode` enum, mirrored in `web::edge::error_code`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// Status indicating a successful operation.
    Ok = 0x00,
    /// An internal error occurred.
    Internal = 0x01,
    /// Status indicating the executor is in an invalid state for the requested operation.
    InvalidState = 0x02,
    /// Status indicating there are no more steps of execution to run.
    EndOfMethod = 0x03,
    /// A method or program was already loaded.
    AlreadyLoaded = 0x04,
    /// The operation is not supported in the current context.
    NotSupported = 0x10,
    /// The operation is not implemented.
    NotImplemented = 0x11,
    /// User provided an invalid argument.
    InvalidArgument = 0x12,
    /// Object is an invalid type for the operation.
    InvalidType = 0x13,
    /// An operator in the program is missing from the kernel registry.
    OperatorMissing = 0x14,
    /// The kernel registry is full.
    RegistrationExceedingMaxKernels = 0x15,
    /// The kernel is already registered.
    RegistrationAlreadyRegistered = 0x16,
    /// The requested resource could not be found.
    NotFound = 0x20,
    /// Could not allocate the requested memory.
    MemoryAllocationFailed = 0x21,
    /// Could not access a resource.
    AccessFailed = 0x22,
    /// Error caused by the contents of a program.
    InvalidProgram = 0x23,
    /// Error caused by the contents of external data.
    InvalidExternalData = 0x24,
    /// Does not have enough resources to perform the requested operation.
    OutOfResources = 0x25,
    /// Init stage: the backend cannot run the processed blob it was given.
    DelegateInvalidCompatibility = 0x30,
    /// Init stage: the backend failed to allocate memory.
    DelegateMemoryAllocationFailed = 0x31,
    /// Execute stage: the handle is invalid.
    DelegateInvalidHandle = 0x32,
}

impl ErrorCode {
    /// Every code, in numeric order.
    pub const ALL: [ErrorCode; 21] = [
        Self::Ok,
        Self::Internal,
        Self::InvalidState,
        Self::EndOfMethod,
        Self::AlreadyLoaded,
        Self::NotSupported,
        Self::NotImplemented,
        Self::InvalidArgument,
        Self::InvalidType,
        Self::OperatorMissing,
        Self::RegistrationExceedingMaxKernels,
        Self::RegistrationAlreadyRegistered,
        Self::NotFound,
        Self::MemoryAllocationFailed,
        Self::AccessFailed,
        Self::InvalidProgram,
        Self::InvalidExternalData,
        Self::OutOfResources,
        Self::DelegateInvalidCompatibility,
        Self::DelegateMemoryAllocationFailed,
        Self::DelegateInvalidHandle,
    ];

    /// The upstream name of the code, e.g. `"NotFound"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Ok => "Ok",
            Self::Internal => "Internal",
            Self::InvalidState => "InvalidState",
            Self::EndOfMethod => "EndOfMethod",
            Self::AlreadyLoaded => "AlreadyLoaded",
            Self::NotSupported => "NotSupported",
            Self::NotImplemented => "NotImplemented",
            Self::InvalidArgument => "InvalidArgument",
            Self::InvalidType => "InvalidType",
            Self::OperatorMissing => "OperatorMissing",
            Self::RegistrationExceedingMaxKernels => "RegistrationExceedingMaxKernels",
            Self::RegistrationAlreadyRegistered => "RegistrationAlreadyRegistered",
            Self::NotFound => "NotFound",
            Self::MemoryAllocationFailed => "MemoryAllocationFailed",
            Self::AccessFailed => "AccessFailed",
            Self::InvalidProgram => "InvalidProgram",
            Self::InvalidExternalData => "InvalidExternalData",
            Self::OutOfResources => "OutOfResources",
            Self::DelegateInvalidCompatibility => "DelegateInvalidCompatibility",
            Self::DelegateMemoryAllocationFailed => "DelegateMemoryAllocationFailed",
            Self::DelegateInvalidHandle => "DelegateInvalidHandle",
        }
    }

    /// The code with this upstream name, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|code| code.name() == name)
    }

    /// The code with this numeric value, if any.
    pub fn from_u32(value: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|code| *code as u32 == value)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An ExecuTorch error: an upstream [`ErrorCode`] and a message saying what went wrong.
///
/// `Error` never carries [`ErrorCode::Ok`] in practice; success is `Result::Ok`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Error {
    code: ErrorCode,
    message: Cow<'static, str>,
}

impl Error {
    /// An error with this code and message.
    pub fn new(code: ErrorCode, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The upstream code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The human-readable message (without the code).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The ExecuTorch error for a parameter provider's IREE `status` while doing `what`: the
    /// nearest code (a missing key `NotFound`; bytes out of range, lost or refused
    /// `InvalidExternalData`; exhaustion `MemoryAllocationFailed`; network and permission
    /// failures `AccessFailed`; `Unimplemented` `NotSupported`; anything else `Internal`), the
    /// message keeping the IREE code and message.
    pub fn from_status(status: &Status, what: &str) -> Self {
        let code = match status.code() {
            StatusCode::NotFound => ErrorCode::NotFound,
            StatusCode::OutOfRange | StatusCode::DataLoss | StatusCode::InvalidArgument => {
                ErrorCode::InvalidExternalData
            }
            StatusCode::ResourceExhausted => ErrorCode::MemoryAllocationFailed,
            StatusCode::PermissionDenied
            | StatusCode::Unavailable
            | StatusCode::Unauthenticated
            | StatusCode::DeadlineExceeded
            | StatusCode::Aborted
            | StatusCode::Cancelled => ErrorCode::AccessFailed,
            StatusCode::Unimplemented => ErrorCode::NotSupported,
            _ => ErrorCode::Internal,
        };
        Self::new(code, format!("{what}: {status}"))
    }
}

/// Writes one constructor per code: `fn $name(message) -> Self` = `Self::new($Code::$variant, message)`.
macro_rules! shorthands {
    ($ty:ident, $code:ident { $($name:ident => $variant:ident),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = concat!("Shorthand for [`", stringify!($code), "::", stringify!($variant), "`].")]
                pub fn $name(message: impl Into<Cow<'static, str>>) -> Self {
                    Self::new($code::$variant, message)
                }
            )*
        }
    };
}

shorthands!(Error, ErrorCode {
    internal => Internal,
    invalid_state => InvalidState,
    not_supported => NotSupported,
    not_implemented => NotImplemented,
    invalid_argument => InvalidArgument,
    invalid_type => InvalidType,
    not_found => NotFound,
    memory_allocation_failed => MemoryAllocationFailed,
    access_failed => AccessFailed,
    invalid_program => InvalidProgram,
    invalid_external_data => InvalidExternalData,
    out_of_resources => OutOfResources,
    delegate_invalid_compatibility => DelegateInvalidCompatibility,
    delegate_memory_allocation_failed => DelegateMemoryAllocationFailed,
    delegate_invalid_handle => DelegateInvalidHandle,
});

/// Result of a registry or backend operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// IREE's `iree_status_code_t`, with its exact numeric values (used by parameter providers).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatusCode {
    /// Success.
    Ok = 0,
    /// The operation was cancelled.
    Cancelled = 1,
    /// Unknown error.
    Unknown = 2,
    /// The caller passed an invalid argument.
    InvalidArgument = 3,
    /// A deadline passed before the operation completed.
    DeadlineExceeded = 4,
    /// A requested entity was not found.
    NotFound = 5,
    /// An entity the caller tried to create already exists.
    AlreadyExists = 6,
    /// The caller may not perform the operation.
    PermissionDenied = 7,
    /// A resource (memory, quota) is exhausted.
    ResourceExhausted = 8,
    /// The system is not in a state required for the operation.
    FailedPrecondition = 9,
    /// The operation was aborted.
    Aborted = 10,
    /// The operation was attempted past the valid range.
    OutOfRange = 11,
    /// The operation is not implemented or supported.
    Unimplemented = 12,
    /// An internal invariant was broken.
    Internal = 13,
    /// The service is unavailable (usually transient).
    Unavailable = 14,
    /// Unrecoverable data loss or corruption.
    DataLoss = 15,
    /// The request lacks valid authentication.
    Unauthenticated = 16,
}

impl StatusCode {
    /// Every code, in numeric order.
    pub const ALL: [StatusCode; 17] = [
        Self::Ok,
        Self::Cancelled,
        Self::Unknown,
        Self::InvalidArgument,
        Self::DeadlineExceeded,
        Self::NotFound,
        Self::AlreadyExists,
        Self::PermissionDenied,
        Self::ResourceExhausted,
        Self::FailedPrecondition,
        Self::Aborted,
        Self::OutOfRange,
        Self::Unimplemented,
        Self::Internal,
        Self::Unavailable,
        Self::DataLoss,
        Self::Unauthenticated,
    ];

    /// IREE's name for the code, e.g. `"NOT_FOUND"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Ok => "OK",
            Self::Cancelled => "CANCELLED",
            Self::Unknown => "UNKNOWN",
            Self::InvalidArgument => "INVALID_ARGUMENT",
            Self::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Self::NotFound => "NOT_FOUND",
            Self::AlreadyExists => "ALREADY_EXISTS",
            Self::PermissionDenied => "PERMISSION_DENIED",
            Self::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Self::FailedPrecondition => "FAILED_PRECONDITION",
            Self::Aborted => "ABORTED",
            Self::OutOfRange => "OUT_OF_RANGE",
            Self::Unimplemented => "UNIMPLEMENTED",
            Self::Internal => "INTERNAL",
            Self::Unavailable => "UNAVAILABLE",
            Self::DataLoss => "DATA_LOSS",
            Self::Unauthenticated => "UNAUTHENTICATED",
        }
    }
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An IREE status: a [`StatusCode`] and a message (used by the parameter providers).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Status {
    code: StatusCode,
    message: Cow<'static, str>,
}

impl Status {
    /// A status with this code and message.
    pub fn new(code: StatusCode, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The IREE code.
    pub fn code(&self) -> StatusCode {
        self.code
    }

    /// The human-readable message (without the code).
    pub fn message(&self) -> &str {
        &self.message
    }
}

shorthands!(Status, StatusCode {
    cancelled => Cancelled,
    unknown => Unknown,
    invalid_argument => InvalidArgument,
    deadline_exceeded => DeadlineExceeded,
    not_found => NotFound,
    already_exists => AlreadyExists,
    permission_denied => PermissionDenied,
    resource_exhausted => ResourceExhausted,
    failed_precondition => FailedPrecondition,
    aborted => Aborted,
    out_of_range => OutOfRange,
    unimplemented => Unimplemented,
    internal => Internal,
    unavailable => Unavailable,
    data_loss => DataLoss,
    unauthenticated => Unauthenticated,
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executorch_codes_have_upstream_values() {
        let expected: [(ErrorCode, u32, &str); 21] = [
            (ErrorCode::Ok, 0x00, "Ok"),
            (ErrorCode::Internal, 0x01, "Internal"),
            (ErrorCode::InvalidState, 0x02, "InvalidState"),
            (ErrorCode::EndOfMethod, 0x03, "EndOfMethod"),
            (ErrorCode::AlreadyLoaded, 0x04, "AlreadyLoaded"),
            (ErrorCode::NotSupported, 0x10, "NotSupported"),
            (ErrorCode::NotImplemented, 0x11, "NotImplemented"),
            (ErrorCode::InvalidArgument, 0x12, "InvalidArgument"),
            (ErrorCode::InvalidType, 0x13, "InvalidType"),
            (ErrorCode::OperatorMissing, 0x14, "OperatorMissing"),
            (
                ErrorCode::RegistrationExceedingMaxKernels,
                0x15,
                "RegistrationExceedingMaxKernels",
            ),
            (
                ErrorCode::RegistrationAlreadyRegistered,
                0x16,
                "RegistrationAlreadyRegistered",
            ),
            (ErrorCode::NotFound, 0x20, "NotFound"),
            (
                ErrorCode::MemoryAllocationFailed,
                0x21,
                "MemoryAllocationFailed",
            ),
            (ErrorCode::AccessFailed, 0x22, "AccessFailed"),
            (ErrorCode::InvalidProgram, 0x23, "InvalidProgram"),
            (ErrorCode::InvalidExternalData, 0x24, "InvalidExternalData"),
            (ErrorCode::OutOfResources, 0x25, "OutOfResources"),
            (
                ErrorCode::DelegateInvalidCompatibility,
                0x30,
                "DelegateInvalidCompatibility",
            ),
            (
                ErrorCode::DelegateMemoryAllocationFailed,
                0x31,
                "DelegateMemoryAllocationFailed",
            ),
            (
                ErrorCode::DelegateInvalidHandle,
                0x32,
                "DelegateInvalidHandle",
            ),
        ];
        for (code, value, name) in expected {
            assert_eq!(code as u32, value, "{name}");
            assert_eq!(code.name(), name);
            assert_eq!(ErrorCode::from_name(name), Some(code));
            assert_eq!(ErrorCode::from_u32(value), Some(code));
        }
        assert_eq!(ErrorCode::from_u32(0x05), None);
        assert_eq!(ErrorCode::from_name("notfound"), None);
    }

    #[test]
    fn iree_codes_have_upstream_values() {
        for (index, code) in StatusCode::ALL.into_iter().enumerate() {
            assert_eq!(code as usize, index, "{code}");
        }
        assert_eq!(StatusCode::OutOfRange as u32, 11);
        assert_eq!(StatusCode::PermissionDenied.name(), "PERMISSION_DENIED");
    }

    #[test]
    fn errors_display_code_and_message() {
        let error = Error::not_found("no backend named \"x\"");
        assert_eq!(error.to_string(), "NotFound: no backend named \"x\"");
        let status = Status::new(StatusCode::OutOfRange, "span ends at 12 past 10");
        assert_eq!(status.to_string(), "OUT_OF_RANGE: span ends at 12 past 10");
    }
}
