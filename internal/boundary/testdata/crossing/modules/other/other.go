// Package other stands for the real package of that path.
package other
