package cursor

// FileError lets the external tests inspect the error of a File store.
type FileError = fileError
