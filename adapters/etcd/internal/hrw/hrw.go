// Package hrw is rendezvous (highest random weight) hashing: every process
// that knows the same members picks the same member for a stream, and a
// member joining or leaving moves only the streams it wins or held.
package hrw

import "hash/fnv"

// Score returns member's weight for stream: the 64-bit FNV-1a hash of both
// names, separated by a zero byte, through the SplitMix64 finalizer. It is
// the same in every process and every release.
func Score(member, stream string) uint64 {
	f := fnv.New64a()
	f.Write([]byte(member + "\x00" + stream))
	h := f.Sum64()
	h = (h ^ h>>30) * 0xbf58476d1ce4e5b9
	h = (h ^ h>>27) * 0x94d049bb133111eb
	return h ^ h>>31
}

// Pick returns the member of members with the highest score for stream (the
// smallest name among equal scores), and false when members is empty.
func Pick(stream string, members []string) (string, bool) {
	best, top := "", uint64(0)
	for i, m := range members {
		if s := Score(m, stream); i == 0 || s > top || s == top && m < best {
			best, top = m, s
		}
	}
	return best, len(members) > 0
}
