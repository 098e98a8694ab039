// Package keelpgx stands for the real package of that path.
package keelpgx
