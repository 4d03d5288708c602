package etcd

import clientv3 "go.etcd.io/etcd/client/v3"

// prefixRange returns the key range [key, end) of the keys under prefix, as
// clientv3.WithPrefix does: every key for an empty prefix.
func prefixRange(prefix string) (key, end string) {
	if prefix == "" {
		return "\x00", "\x00"
	}
	return prefix, clientv3.GetPrefixRangeEnd(prefix)
}
