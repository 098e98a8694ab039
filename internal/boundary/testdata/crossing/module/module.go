// Package module stands for the real package of that path.
package module
