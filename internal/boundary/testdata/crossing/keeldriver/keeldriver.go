// Package keeldriver stands for the real package of that path.
package keeldriver
