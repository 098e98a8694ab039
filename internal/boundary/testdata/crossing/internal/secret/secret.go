// Package secret stands for the real package of that path.
package secret
