// Package nodriver holds only a test: that the library registers no
// database/sql driver and links none, so an application can register its
// own under any name. It must not import internal/testdb, which links the
// drivers the other tests use.
package nodriver
