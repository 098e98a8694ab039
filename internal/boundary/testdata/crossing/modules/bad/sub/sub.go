// Package sub stands for the real package of that path.
package sub
