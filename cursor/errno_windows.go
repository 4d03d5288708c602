package cursor

import "syscall"

// Windows error codes (winerror.h) that no retry can fix. The syscall
// package's EROFS and ELOOP are invented values Windows never returns, and
// its ENAMETOOLONG too, so the real codes are listed here.
const (
	errorWriteProtect        syscall.Errno = 19   // ERROR_WRITE_PROTECT: the media is write-protected (read-only)
	errorInvalidName         syscall.Errno = 123  // ERROR_INVALID_NAME: the file name syntax is incorrect
	errorFilenameExcedRange  syscall.Errno = 206  // ERROR_FILENAME_EXCED_RANGE: the file name is too long
	errorCantResolveFilename syscall.Errno = 1921 // ERROR_CANT_RESOLVE_FILENAME: too many levels of symbolic links
)

// platformPermanentCauses are the causes, beyond permanentCauses, that no
// retry can fix on Windows.
var platformPermanentCauses = []error{
	errorWriteProtect,
	errorInvalidName,
	errorFilenameExcedRange,
	errorCantResolveFilename,
}
