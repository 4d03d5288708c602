package postgres_test

func runChild(role string) int { return 2 }
