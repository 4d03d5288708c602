package cursor

// platformPermanentCauses is empty on Plan 9, which has no symbolic links
// and whose errors are strings, with no errno for a read-only file system.
var platformPermanentCauses []error
