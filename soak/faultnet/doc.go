// Package faultnet is placeholder.
package faultnet
