package lock_test

const childEnv = "CAIRN_LOCK_TEST_CHILD"

func childMain() int { return 2 }
