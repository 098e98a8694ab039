// Package keel stands for the engine's public root.
package keel
