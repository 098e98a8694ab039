package keelevents

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"os"
)

// instanceID names this process among relays and subscribers: host, pid
// and a random suffix, so a restarted process is a new owner.
func instanceID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// PartitionOf returns the partition of key among n: FNV-1a of the key mod
// n. It must never change, since per-key order rests on it.
func PartitionOf(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}
