module github.com/keelwork/keel

go 1.22
