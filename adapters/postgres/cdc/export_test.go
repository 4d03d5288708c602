package cdc

// StatusUpdates returns the number of standby status updates the
// connections of s have sent.
func StatusUpdates(s *Source) int64 { return s.statuses.Load() }
